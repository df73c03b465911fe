"""Start-up cost in fresh processes (issue 14.5): `import tensorforge`, `tensorforge --help`, `import
tensorforge.runtime`, and `tfg.load` + first `run` of the seed engine (GELU twice, built here first).

    PYTHONPATH=. python3 bench/startup_time.py [--repeat 5]

Each row is the median wall time of `--repeat` fresh interpreters (the process, not an in-process timer, so
interpreter start and every import count), with the same for `import torch` alone as the floor. Targets of the
issue: --help under 1 s, load + first run under 3 s on the CPU machine.
"""

import argparse
import os
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", help="also write the table as markdown to this file (e.g. bench/results/startup-cpu.md)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import torch
    import tensorforge as tfg
    sys.path.insert(0, str(ROOT / "examples" / "gelu"))
    from model import MyNet
    py = sys.executable
    with tempfile.TemporaryDirectory() as folder:            # the seed engine, removed afterwards
        engine_path = Path(folder) / "seed.engine"
        tfg.build(MyNet(), example_inputs=(torch.randn(2, 16),), device="cpu").save(engine_path)
        rows = [("python -c pass", [py, "-c", "pass"]),
                ("import torch (floor)", [py, "-c", "import torch"]),
                ("import tensorforge", [py, "-c", "import tensorforge"]),
                ("tensorforge --help", [py, "-m", "tensorforge", "--help"]),
                ("import tensorforge.runtime", [py, "-c", "import tensorforge.runtime"]),
                ("tfg.load + first run (seed engine)", [py, "-c", LOAD_RUN.format(path=str(engine_path))])]
        results = [(name, _time(argv_, args.repeat)) for name, argv_ in rows]
    targets = {"tensorforge --help": 1.0, "tfg.load + first run (seed engine)": 3.0}
    load = " / ".join(f"{v:.1f}" for v in os.getloadavg())
    lines = [f"Start-up in fresh processes (bench/startup_time.py): median of {args.repeat}, {os.cpu_count()} cores, "
             f"load average {load} (1/5/15 min) at the end, torch {torch.__version__}.", "",
             "| what | median s | target (issue 14) |", "| --- | --- | --- |"]
    for name, t in results:
        target = targets.get(name)
        verdict = "" if target is None else f"< {target:g} s: {'met' if t < target else 'missed'}"
        lines.append(f"| {name} | {t:.2f} | {verdict} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
