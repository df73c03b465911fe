"""Run fuzz cases in a child process, so that a crash (a signal, an abort) is seen and attributed to its case.

    python tests/fuzz/runner.py KIND SEED START STOP [TIME_LIMIT_S]     # child: one JSON line per case
    run_batches(kind, seed, count, ...) -> list[dict]                    # parent: restarts after a crash

Each result is {"i", "kind", "seed_model", "mutation", "outcome", "detail"}; outcome "crash" is the parent's
verdict for the case the child was running when it died, "hang" also when the child stopped answering.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def child(kind: str, seed: int, start: int, stop: int, limit: float) -> None:
    sys.path.insert(0, str(HERE))
    import fuzzlib
    import onnxruntime  # noqa: F401 - imported before the first case, so its import is not timed
    make = fuzzlib.engine_case if kind == "engine" else fuzzlib.onnx_case
    for name in sorted(fuzzlib.seed_models()):              # warm-up: first builds load kernels, tactics
        fuzzlib.seed_engine(name)
    for i in range(start, stop):
        print(json.dumps({"start": i}), flush=True)
        if os.environ.get("TFG_FUZZ_ABORT_AT") == str(i):   # the crash detector's own test
            os.abort()
        case = make(seed, i)
        outcome, detail = fuzzlib.run_case(case, limit)
        print(json.dumps({"i": i, "kind": kind, "seed_model": case.seed_model, "mutation": case.mutation,
                          "outcome": outcome, "detail": detail[:400]}), flush=True)


def run_batches(kind: str, seed: int, start: int, stop: int, limit: float = 20.0, nice: int = 0,
                log=None) -> list[dict]:
    """Cases [start, stop) in child processes; a child that dies is restarted after the case it died on."""
    results: list[dict] = []
    i = start
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_INTERPRET="1")
    while i < stop:
        cmd = [sys.executable, str(HERE / "runner.py"), kind, str(seed), str(i), str(stop), str(limit)]
        if nice:
            cmd = ["nice", "-n", str(nice)] + cmd
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=ROOT, text=True)
        current, last_seen = None, time.monotonic()
        for line in proc.stdout:
            rec = json.loads(line)
            if "start" in rec:
                current = rec["start"]
                continue
            results.append(rec)
            if log is not None:
                log(rec)
            current, i = None, rec["i"] + 1
        rc = proc.wait()
        if current is not None:                # died inside a case
            results.append({"i": current, "kind": kind, "seed_model": "?", "mutation": "?",
                            "outcome": "crash", "detail": f"child exited with {rc}"})
            i = current + 1
        elif rc != 0 and i < stop:
            results.append({"i": i, "kind": kind, "seed_model": "?", "mutation": "?", "outcome": "crash",
                            "detail": f"child exited with {rc} between cases"})
            i += 1
    return results


if __name__ == "__main__":
    child(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
          float(sys.argv[5]) if len(sys.argv) > 5 else 20.0)
