"""The GPU benchmark of BENCH.md in one command:  PYTHONPATH=. python3 bench/run.py [--quick] [filters]

Runs, in one process on one GPU: the seed GELU case (fp32, fp16) against a device copy and the torch peers; every
zoo model × batch × precision against torch eager, eager + CUDA graph, torch.compile and torch.compile + CUDA graph,
with the fp16 accuracy check against onnxruntime fp32 and a per-layer profile at batch 1; and the resnet50 build
cost with a cold and a warm timing cache (run before the zoo, so a time budget never drops it). Writes bench/results/<gpu>.json, <gpu>.md and, with matplotlib, plots.
A case that fails is recorded with its error and the run goes on; `--budget-s` stops starting new zoo cases when
the time is spent and lists them under "Not run". Measured on the H200: ≈ 17 s per zoo case (export, build, five
runners, accuracy and profile at the smallest batch), so the whole zoo takes two runs (see bench/README.md).
"""

import argparse
import os
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

ALL_MODELS = ["resnet50", "mobilenet_v3_large", "efficientnet_b0", "convnext_tiny", "vit_b_16", "bert_base_seq128",
              "gpt2_seq128"]


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(ALL_MODELS), help="comma-separated zoo models (or 'none')")
    p.add_argument("--batches", default="1,32")
    p.add_argument("--dtypes", default="fp16,fp32", help="fp16 and/or fp32 (fp32 allows TF32)")
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--gelu-elements", type=int, default=256 * 2**20)
    p.add_argument("--skip", default="", help="comma list of: gelu, zoo, build, profile, accuracy, compile")
    p.add_argument("--quick", action="store_true", help="resnet50 and bert, fp16, 30 iterations")
    p.add_argument("--budget-s", type=float, default=420.0, help="start no new zoo case after this many seconds")
    p.add_argument("--out-dir", default=os.path.join(HERE, "results"))
    p.add_argument("--stem", default=None, help="results file name (default: the GPU's name)")
    p.add_argument("--label", default="", help="what was measured, e.g. the commit: recorded with every row of this "
                   "run, so that merged results say which run each row came from")
    p.add_argument("--append", action="store_true", help="merge into an existing results file of the same stem: "
                   "rows measured now replace rows of the same case, the others are kept")
    args = p.parse_args(argv)
    if args.quick:
        args.models = "resnet50,bert_base_seq128" if args.models == ",".join(ALL_MODELS) else args.models
        args.dtypes, args.iters = "fp16", 30
    return args


def main(argv=None) -> int:
    args = parse(argv)
    import torch
    import triton

    import tensorforge
    from tensorforge.util import log as tflog
    if not torch.cuda.is_available():
        print("bench/run.py needs a CUDA GPU; on the CPU run bench/cpu.py", file=sys.stderr)
        return 2
    tflog.set_severity(tflog.Severity.WARNING)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    skip = {s for s in args.skip.split(",") if s}
    t_start = time.perf_counter()

    def log(msg):
        print(f"[{time.perf_counter() - t_start:7.1f}s] {msg}", flush=True)

    gpu = torch.cuda.get_device_name(0)
    stem = args.stem or "".join(c if c.isalnum() else "-" for c in gpu.lower()).strip("-")
    res = {"environment": {"gpu": gpu, "torch": torch.__version__, "triton": triton.__version__,
                           "tensorforge": tensorforge.__version__, "iters": args.iters, "warmup": args.warmup,
                           "args": vars(args)},
           "gelu": [], "zoo": [], "build_cost": None, "skipped": []}
    # --append: read the earlier results now — the partial writes after each case replace that file
    previous = _load(os.path.join(args.out_dir, f"{stem}.json")) if args.append else None

    def merged() -> dict:       # what gets written: this run's rows over the earlier run's (when --append)
        _label_rows(res, args.label)
        if previous is None:
            return res
        return _merge_previous({**res, "environment": dict(res["environment"])}, previous)

    if "gelu" not in skip:
        import gelu_case
        for dtype in (torch.float32, torch.float16):
            try:
                res["gelu"].append(gelu_case.run_case(args.gelu_elements, dtype, args.iters, args.warmup,
                                                      "compile" not in skip, log))
            except Exception as e:  # noqa: BLE001 - recorded, the run goes on
                traceback.print_exc()
                res["gelu"].append({"dtype": str(dtype), "error": f"{type(e).__name__}: {e}"})
            release()

    onnx_cache: dict = {}
    if "build" not in skip:
        import build_cost
        import zoo
        try:
            t0 = time.perf_counter()
            data, exporter = zoo.export("resnet50", zoo.make("resnet50"))
            onnx_cache["resnet50"] = (data, exporter)
            log(f"resnet50: exported with {exporter} in {time.perf_counter() - t0:.1f} s")
            res["build_cost"] = build_cost.run_case(data, (32, 3, 224, 224), True, log)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            res["build_cost"] = {"error": f"{type(e).__name__}: {e}"}
        release()

    models = [m for m in args.models.split(",") if m and m != "none"]
    batches = [int(b) for b in args.batches.split(",") if b]
    dtypes = [d for d in args.dtypes.split(",") if d]
    if "zoo" not in skip and models:
        import zoo
        import zoo_case
        work = os.path.join(HERE, ".work")
        os.makedirs(work, exist_ok=True)
        cache_path = os.path.join(tempfile.mkdtemp(prefix="tf-bench-"), "timing.json")
        for name in models:
            if time.perf_counter() - t_start > args.budget_s:
                res["skipped"] += [f"{name} (all cases): time budget of {args.budget_s:.0f} s spent"]
                continue
            try:
                module = zoo.make(name)
                t0 = time.perf_counter()
                if name in onnx_cache:
                    onnx_bytes, exporter = onnx_cache[name]
                else:
                    onnx_bytes, exporter = zoo.export(name, module, os.path.join(work, f"{name}.onnx"))
                    log(f"{name}: exported with {exporter} in {time.perf_counter() - t0:.1f} s")
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                res["zoo"] += [{"model": name, "batch": b, "dtype": d, "error": f"export: {type(e).__name__}: {e}"}
                               for d in dtypes for b in batches]
                continue
            for dtype in dtypes:
                for batch in batches:
                    if time.perf_counter() - t_start > args.budget_s:
                        res["skipped"].append(f"{name} b{batch} {dtype}: time budget spent")
                        continue
                    try:
                        row = zoo_case.run_case(name, module, onnx_bytes, dtype, batch, args.iters, args.warmup,
                                                "compile" not in skip, cache_path,
                                                accuracy="accuracy" not in skip and batch == min(batches),
                                                profile="profile" not in skip and batch == min(batches), log=log)
                        row["exporter"] = exporter
                        res["zoo"].append(row)
                    except Exception as e:  # noqa: BLE001
                        traceback.print_exc()
                        res["zoo"].append({"model": name, "batch": batch, "dtype": dtype,
                                           "error": f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:300]}"})
                    release()
                    _write(merged(), args, stem, plots=False)  # partial results survive a killed run

    res["environment"]["total_seconds"] = round(time.perf_counter() - t_start, 1)
    res = merged()
    report_files = _write(res, args, stem)
    log("wrote " + ", ".join(report_files))
    import report
    print(report.markdown(res))
    return 0


def release() -> None:
    """After a case: drop torch.compile's graphs and return the case's GPU memory before the next one."""
    import gc

    import torch
    torch._dynamo.reset()
    gc.collect()
    torch.cuda.empty_cache()


def _load(path: str) -> dict | None:
    import json
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def _label_rows(res: dict, label: str) -> None:
    """Record `label` (--label) on every row, GELU case and build cost this run measured."""
    res["environment"]["label"] = label
    for row in res["zoo"] + res["gelu"] + ([res["build_cost"]] if isinstance(res["build_cost"], dict) else []):
        row.setdefault("run", label)


def _merge_previous(res: dict, old: dict) -> dict:
    """Rows of an earlier run (same stem) for the cases this run did not measure."""
    key = lambda r: (r.get("model"), r.get("batch"), r.get("dtype"))  # noqa: E731
    done = {key(r) for r in res["zoo"]}
    rank = {m: i for i, m in enumerate(ALL_MODELS)}
    res["zoo"] = sorted([r for r in old.get("zoo", []) if key(r) not in done] + res["zoo"],
                        key=lambda r: (r.get("dtype", ""), rank.get(r.get("model"), len(rank)), r.get("batch", 0)))
    have = {g.get("dtype") for g in res["gelu"]}
    res["gelu"] = [g for g in old.get("gelu", []) if g.get("dtype") not in have] + res["gelu"]
    res["build_cost"] = res["build_cost"] or old.get("build_cost")
    have_rows = {key(r) for r in res["zoo"] if "error" not in r}
    res["skipped"] = [s for s in old.get("skipped", []) + res["skipped"]       # "<model> b<batch> <dtype>: why"
                      if not any(s.startswith(f"{m} b{b} {d}:") or s.startswith(f"{m} (all cases):")
                                 for m, b, d in have_rows)]
    res["environment"]["earlier_runs"] = old["environment"].get("earlier_runs", []) + [old["environment"]]
    return res


def _write(res, args, stem, plots=True):
    import report
    return report.write(res, args.out_dir, stem, plots)


if __name__ == "__main__":
    sys.exit(main())
