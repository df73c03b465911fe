"""A long fuzz campaign over engine files and ONNX models (issue 13): thousands of seeded mutations, a summary table.

    PYTHONPATH=. python tools/fuzz_campaign.py --cases 10000 --seed 1 --jobs 2 --nice 19 --out fuzz_report
    PYTHONPATH=. python tools/fuzz_campaign.py --cases 10000 --max-minutes 60      # stop early, report what ran

Cases are split evenly between engine and ONNX mutations (tests/fuzz/fuzzlib.py) and run in child processes in
batches (tests/fuzz/runner.py), so a crash is attributed to its case and the campaign goes on. Writes
OUT/summary.md (the table: cases, clean errors, other exceptions, crashes, hangs, silent wrong outputs, and the
cases that loaded/built and ran correctly, and how many of those were weight edits checked against onnxruntime),
OUT/findings.jsonl (every case that is not clean or ok) and OUT/results.jsonl (every case).
A silent wrong output is a weight-value edit whose output differs from onnxruntime's on the equally edited model.
"""

import argparse
import collections
import json
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
import runner  # noqa: E402

COLUMNS = [("cases", None), ("clean errors", "clean"), ("other exceptions", "other"), ("crashes", "crash"),
           ("hangs", "hang"), ("silent wrong outputs", "wrong"), ("loaded/built and ran", "ok"),
           ("of which weight edits checked against onnxruntime", "oracle")]


def table(results: dict[str, list[dict]]) -> str:
    lines = ["| kind | " + " | ".join(c for c, _ in COLUMNS) + " |", "|" + " --- |" * (len(COLUMNS) + 1)]
    total = collections.Counter()
    for kind, rs in results.items():
        c = collections.Counter(r["outcome"] for r in rs)
        c["cases"] = len(rs)
        c["oracle"] = sum(1 for r in rs if r["mutation"].startswith("weight values") and r["outcome"] in ("ok", "wrong"))
        total.update(c)
        lines.append(f"| {kind} | " + " | ".join(str(c[k or 'cases']) for _, k in COLUMNS) + " |")
    lines.append("| all | " + " | ".join(str(total[k or 'cases']) for _, k in COLUMNS) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10000, help="total cases, half engine, half ONNX (default 10000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2, help="child processes at once (default 2)")
    ap.add_argument("--chunk", type=int, default=250, help="cases per child batch (default 250)")
    ap.add_argument("--limit", type=float, default=20.0, help="seconds a case may take before it is a hang")
    ap.add_argument("--nice", type=int, default=0, help="run the children under nice -n N")
    ap.add_argument("--max-minutes", type=float, default=None, help="stop starting batches after this long")
    ap.add_argument("--out", default="fuzz_report", help="folder for summary.md and findings.jsonl")
    args = ap.parse_args(argv)

    half = args.cases // 2
    work = [(kind, s, min(s + args.chunk, n)) for kind, n in (("engine", args.cases - half), ("onnx", half))
            for s in range(0, n, args.chunk)]
    work.sort(key=lambda w: (w[1], w[0]))                  # interleave kinds so a cut campaign covers both
    results: dict[str, list[dict]] = {"engine": [], "onnx": []}
    lock, t0 = threading.Lock(), time.monotonic()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    findings = open(out / "findings.jsonl", "w")

    def log(rec):
        if rec["outcome"] not in ("clean", "ok"):
            with lock:
                findings.write(json.dumps(rec) + "\n")
                findings.flush()

    def worker():
        while True:
            with lock:
                if not work or (args.max_minutes and time.monotonic() - t0 > args.max_minutes * 60):
                    return
                kind, start, stop = work.pop(0)
            rs = runner.run_batches(kind, args.seed, start, stop, args.limit, args.nice, log)
            with lock:
                results[kind].extend(rs)
                done = sum(len(v) for v in results.values())
            print(f"[{time.monotonic() - t0:7.0f} s] {done} cases", flush=True)

    threads = [threading.Thread(target=worker) for _ in range(max(1, args.jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    findings.close()
    with open(out / "results.jsonl", "w") as f:
        for kind in results:
            for r in sorted(results[kind], key=lambda r: r["i"]):
                f.write(json.dumps(r) + "\n")
    elapsed = time.monotonic() - t0
    text = (f"# Fuzz campaign: seed {args.seed}, {sum(len(v) for v in results.values())} of {args.cases} cases, "
            f"{elapsed / 60:.1f} min\n\n{table(results)}\n")
    (out / "summary.md").write_text(text)
    print(text)
    bad = sum(1 for rs in results.values() for r in rs if r["outcome"] not in ("clean", "ok"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
