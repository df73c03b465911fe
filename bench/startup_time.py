"""Start-up cost in fresh processes (issue 14.5): `import tensorforge`, `tensorforge --help`, `import
tensorforge.runtime`, and `tfg.load` + first `run` of the seed engine (GELU twice, built here first).

    PYTHONPATH=. python3 bench/startup_time.py [--repeat 5]

Each row is the median wall time of `--repeat` fresh interpreters (the process, not an in-process timer, so
interpreter start and every import count), with the same for `import torch` alone as the floor. Targets of the
issue: --help under 1 s, load + first run under 3 s on the CPU machine.
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LOAD_RUN = '''
import torch, tensorforge as tfg
e = tfg.load({path!r}, device="cpu")
e.run({{e.input_names[0]: torch.randn(2, 16)}})
'''


def _time(argv, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    import torch
    import tensorforge as tfg
    sys.path.insert(0, str(ROOT / "examples" / "gelu"))
    from model import MyNet
    engine_path = Path(tempfile.mkdtemp()) / "seed.engine"
    tfg.build(MyNet(), example_inputs=(torch.randn(2, 16),), device="cpu").save(engine_path)
    py = sys.executable
    rows = [("python -c pass", [py, "-c", "pass"]),
            ("import torch (floor)", [py, "-c", "import torch"]),
            ("import tensorforge", [py, "-c", "import tensorforge"]),
            ("tensorforge --help", [py, "-m", "tensorforge", "--help"]),
            ("import tensorforge.runtime", [py, "-c", "import tensorforge.runtime"]),
            ("tfg.load + first run (seed engine)", [py, "-c", LOAD_RUN.format(path=str(engine_path))])]
    print(f"{'what':<38} median of {args.repeat} fresh processes")
    for name, argv in rows:
        print(f"{name:<38} {_time(argv, args.repeat):6.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
