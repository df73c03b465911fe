"""GPU smoke of the benchmark harness (bench/run.py) before the runs of record: every part on the tiny stand-in
models on CUDA — the freezing and max-autotune peers captured in CUDA graphs, the strongest-peer ratios, accuracy at
every batch with its clause, the TF32-off fp32 check, precision rows (timed, or "not run: …"), dynamic rows, the
build cost beside torch.compile's compile time and the CUDA-graph column. One PASS/FAIL line per check; exit 1 on
any FAIL.   PYTHONPATH=. python3 bench/gpu_smoke/bench_harness.py      (≈ 60–90 s on an H200)
"""

import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import run  # noqa: E402


def main() -> int:
    out = tempfile.mkdtemp(prefix="bench-smoke-")
    t0 = time.perf_counter()
    rc = run.main(["--models", "tiny_cnn,tiny_bert", "--part", "fp16,precision,dynamic,fp32", "--batches", "1,2",
                   "--max-autotune", "tiny_cnn:2", "--precision-batches", "2", "--precision-extra", "",
                   "--best-batches", "2", "--dynamic-models", "tiny_cnn,tiny_bert", "--iters", "10", "--warmup", "3",
                   "--skip", "gelu", "--out-dir", out, "--stem", "smoke", "--label", "smoke"])
    wall = time.perf_counter() - t0
    checks: list[tuple[str, bool, str]] = [("run_exit_0", rc == 0, f"rc {rc}, {wall:.0f} s")]
    res = json.load(open(os.path.join(out, "smoke.json")))
    res32 = json.load(open(os.path.join(out, "smoke-fp32.json")))
    for row in res["zoo"] + res32["zoo"]:
        tag = f"{row['model']}_b{row['batch']}_{row['dtype']}"
        if "error" in row:
            checks.append((f"zoo_{tag}", False, row["error"]))
            continue
        runners = row["runners"]
        want = ["eager", "eager+graph", "compile", "compile+graph", "freeze+graph"]
        if row["model"] == "tiny_cnn" and row["batch"] == 2 and row["dtype"] == "fp16":
            want.append("max-autotune+graph")
        errs = {p: runners.get(p, {}).get("error", "missing") for p in want if "median_ms" not in runners.get(p, {})}
        checks.append((f"peers_{tag}", not errs, json.dumps(errs) if errs else
                       ", ".join(f"{p} {runners[p]['median_ms']:.3f}" for p in want)))
        checks.append((f"strongest_{tag}", bool(row.get("strongest_peer")) and bool(row.get("ratio_vs_strongest")),
                       f"{row.get('strongest_peer')} ratio {row.get('ratio_vs_strongest')}"))
        checks.append((f"graphs_{tag}", row.get("graphs") is True, str(row.get("graph_note"))))
        acc = row.get("accuracy_vs_ort_fp32", {})
        if row["dtype"] == "fp16":
            checks.append((f"accuracy_{tag}", acc.get("pass") is True and bool(acc.get("passed_by")), json.dumps(acc)[:200]))
        else:
            strict = row.get("accuracy_tf32_off", {})
            checks.append((f"tf32_off_{tag}", strict.get("pass") is True, json.dumps(strict)[:200]))
    for b in res["build_costs"]:
        checks.append((f"build_cost_{b['model']}", "cold_s" in b and "torch_compile_s" in b,
                       f"cold {b.get('cold_s')} warm {b.get('warm_s')} compile {b.get('torch_compile_s')}"))
    for r in res["precision"]:
        tag = f"precision_{r['model']}_b{r['batch']}_{r['precision']}"
        ok = r.get("error", "").startswith("not run: ") or ("median_ms" in r and "cosine" in r["accuracy_vs_ort_fp32"])
        checks.append((tag, ok, r.get("error") or f"{r['median_ms']:.3f} ms ×{r['speedup_vs_fp16']} "
                       f"cos {r['accuracy_vs_ort_fp32']['cosine']:.4f}"))
    for r in res["dynamic"]:
        tag = f"dynamic_{r['model']}_{r['point']}"
        ok = "error" not in r and r["cosine_dynamic_vs_static"] > 0.999 and r["dynamic_graphs"]["graphs"]
        checks.append((tag, bool(ok), r.get("error") or f"ratio {r['ratio_dynamic_vs_static']}"))
    failed = 0
    for name, ok, detail in checks:
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {name} {detail}")
    print(f"bench harness smoke: {len(checks) - failed}/{len(checks)} passed in {wall:.0f} s (results in {out})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
