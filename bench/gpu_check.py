"""GPU verification in one command: what CPU-only CI cannot check, on a CUDA machine (H200: about 3 minutes).

    PYTHONPATH=. python3 bench/gpu_check.py --out DIR      # --smoke: CPU, tiny shapes, TRITON_INTERPRET=1

Sections: library plugins (gpu_check_plugins.py), Triton tactics and generated kernels (gpu_check_kernels.py), the
9 light ONNX models before and after save+load, and examples/gelu/run.py beside them (gpu_check_models.py; 2^24
elements by default: its --exportOutput JSON, ≈ 40 s per 2^26 elements per export, makes 2^28 take minutes).
DIR/gpu_check.json and .md are rewritten after every row; a failure is one row, never a stop; checks past
--budget-s are SKIP. Exit status 0: all passed, 1: something failed, 2: no GPU (and no --smoke).
"""

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="folder for gpu_check.json, gpu_check.md and gelu/ (the example)")
    p.add_argument("--smoke", action="store_true", help="CPU, tiny shapes, Triton's interpreter: debug the script")
    p.add_argument("--plugins", default="all", help="'all', 'none' or comma-separated library folders (gelu,roi_align)")
    p.add_argument("--kernels", default="all", help="'all', 'none' or comma-separated words of check names")
    p.add_argument("--models", default="all", help="'all', 'none' or comma-separated light models (resnet50,...)")
    p.add_argument("--skip-example", action="store_true", help="do not run examples/gelu/run.py")
    p.add_argument("--gelu-elements", type=int, default=None,
                   help="elements for examples/gelu/run.py (default 2^24, smoke 2^14; see above for 2^28)")
    p.add_argument("--gelu-timeout", type=float, default=300.0, help="seconds the example may run (from its start)")
    p.add_argument("--keep-example-files", action="store_true", help="keep the example's big files in DIR/gelu")
    p.add_argument("--iters", type=int, default=None, help="timed repetitions per kernel (default 20; smoke 3)")
    p.add_argument("--max-configs", type=int, default=1, help="configs tried (and timed) per tactic or plugin, "
                   "from the first of its list (default 1: every extra config is another compilation)")
    p.add_argument("--budget-s", type=float, default=None,
                   help="start no check after this many seconds (170; smoke 900)")
    a = p.parse_args(argv)
    a.iters = a.iters or (3 if a.smoke else 20)
    a.budget_s = a.budget_s or (900.0 if a.smoke else 170.0)
    a.gelu_elements = a.gelu_elements or (1 << 14 if a.smoke else 1 << 24)
    return a


def _selection(text: str):
    return None if text == "all" else set() if text == "none" else {s.strip() for s in text.split(",") if s.strip()}


def _meta(args, device) -> dict:
    import onnx
    import onnxruntime
    import torch

    import tensorforge
    meta = {"device": str(device), "smoke": args.smoke, "python": platform.python_version(), "torch": torch.__version__,
            "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__,
            "tensorforge": getattr(tensorforge, "__version__", "?"), "tf32": False,
            "started": time.strftime("%Y-%m-%d %H:%M:%S %z"), "args": {k: v for k, v in vars(args).items()}}
    try:
        import triton
        meta["triton"] = triton.__version__
    except ImportError:
        meta["triton"] = None
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        meta.update(gpu=props.name, capability=f"{props.major}.{props.minor}", sms=props.multi_processor_count,
                    memory_gib=round(props.total_memory / 2**30, 1), cuda=torch.version.cuda)
    return meta


def _fmt(v, digits=3) -> str:
    return "" if v is None else f"{v:.{digits}g}"


def markdown(meta: dict, rows: list, example: dict | None) -> str:
    counts = {s: sum(r.status == s for r in rows) for s in ("PASS", "FAIL", "SKIP")}
    head = (f"# gpu_check — {meta.get('gpu', meta['device'])}{' (smoke)' if meta['smoke'] else ''}\n\n"
            f"{meta['started']}; torch {meta['torch']}, triton {meta['triton']}, onnxruntime {meta['onnxruntime']}; "
            f"TF32 off. {counts['PASS']} pass, {counts['FAIL']} fail, {counts['SKIP']} skipped.\n\n"
            "Errors are against each check's oracle (torch reference on the same device; onnxruntime CPU fp32 for "
            "models); max rel err is taken where |ref| exceeds the check's atol and 1e-3·max|ref|. "
            "ms: median over the reps; ×ref = reference ms / ms.\n\n")
    cols = ["section", "check", "shape", "dtype", "max abs err", "max rel err", "result", "ms", "ref ms", "×ref", "reps",
            "note"]
    lines = ["| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    for r in rows:
        note = " ".join(filter(None, [r.error, r.note])).replace("|", "/")
        lines.append(f"| {r.section} | {r.check} | {r.shape} | {r.dtype} | {_fmt(r.max_abs_err)} | "
                     f"{_fmt(r.max_rel_err)} | {r.status} | {_fmt(r.ms, 4)} | {_fmt(r.ref_ms, 4)} | "
                     f"{_fmt(r.speedup)} | {r.reps or ''} | {note} |")
    tail = ""
    if example and example.get("summary"):
        tail = "\n\n## examples/gelu/run.py\n\n```\n" + "\n".join(example["summary"]) + "\n```\n"
    return head + "\n".join(lines) + "\n" + tail


def write(out: Path, meta: dict, rows: list, example: dict | None, elapsed: float) -> None:
    meta = {**meta, "elapsed_s": round(elapsed, 1)}
    data = {"meta": meta, "summary": {s: sum(r.status == s for r in rows) for s in ("PASS", "FAIL", "SKIP")},
            "rows": [{**dataclasses.asdict(r), "speedup": r.speedup} for r in rows], "example": example}
    for name, text in (("gpu_check.json", json.dumps(data, indent=1, default=str)),
                       ("gpu_check.md", markdown(meta, rows, example))):
        tmp = out / (name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, out / name)


def main(argv=None) -> int:
    args = parse(argv)
    if args.smoke:
        os.environ["TRITON_INTERPRET"] = "1"          # before anything imports triton
    import torch

    if not args.smoke and not torch.cuda.is_available():
        print("bench/gpu_check.py needs a CUDA GPU; on a CPU run it with --smoke", file=sys.stderr)
        return 2
    device = torch.device("cpu" if args.smoke else "cuda")
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import gpu_check_kernels
    import gpu_check_models
    import gpu_check_plugins
    from gpu_check_common import Context
    from tensorforge.util import log as tflog
    tflog.set_severity(tflog.Severity.WARNING)

    meta = _meta(args, device)
    example = None
    handle = None if args.skip_example else gpu_check_models.start_example(out / "gelu", args.gelu_elements, args.smoke)

    def on_row(row):
        text = row.error or row.note
        print(f"[{ctx.elapsed():6.1f} s] {row.status:4} {row.section}/{row.check} {row.dtype} {row.shape} "
              f"abs={_fmt(row.max_abs_err)} ms={_fmt(row.ms, 4)} ref={_fmt(row.ref_ms, 4)} {text[:160]}", flush=True)
        write(out, meta, ctx.rows, example, ctx.elapsed())

    ctx = Context(device, args.smoke, args.iters, args.max_configs, args.budget_s, on_row)
    print(f"gpu_check on {meta.get('gpu', device)}: results in {out}", flush=True)
    try:
        for runner, select in ((gpu_check_plugins.run, args.plugins), (gpu_check_kernels.run, args.kernels),
                               (gpu_check_models.run_light, args.models)):
            if select != "none":
                runner(ctx, _selection(select))
    finally:
        if handle is not None:
            print(f"[{ctx.elapsed():6.1f} s] waiting for examples/gelu/run.py (log: {handle['log_path']})", flush=True)
            example = gpu_check_models.finish_example(ctx, handle, args.gelu_timeout, args.keep_example_files)
    write(out, meta, ctx.rows, example, ctx.elapsed())
    print("\n" + (out / "gpu_check.md").read_text())
    return 1 if any(r.status == "FAIL" for r in ctx.rows) else 0


if __name__ == "__main__":
    sys.exit(main())
