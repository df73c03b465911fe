"""Find, with `tensorforge debug precision`, the --layerPrecisions spec of a zoo model's `int8-spec`/`fp8-spec` rows
(bench/precision_case.py), on the bench's own protocol, and record it in bench/precision_specs.json.

    PYTHONPATH=. python3 bench/find_precision_spec.py resnet50 --precisions int8,fp8 [--cosine 0.992] [--device cpu]

The model is zoo.make's (resnet50 without torchvision: bench/plain_resnet.py, the same architecture, module order,
initialisation and ONNX node names), calibrated on precision_case's CALIB_INPUTS inputs and judged on its
TEST_INPUTS test inputs against fp32 onnxruntime; kept layers run at fp16 (the rows allow fp16, as trtexec's
`--int8 --fp16`). `--cosine` above the rows' 0.99 leaves a margin for the GPU's fp16 rounding, which differs from
the CPU's. Each record keeps the command, the device and the cosine the spec was found at.
"""

import argparse
import contextlib
import io
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import precision_case  # noqa: E402
import zoo  # noqa: E402


def model_onnx(name: str) -> tuple[bytes, str]:
    try:
        module = zoo.make(name)
        made = f"zoo.make (torchvision {sys.modules['torchvision'].__version__})" if "torchvision" in sys.modules \
            else "zoo.make"
    except ImportError:
        if name != "resnet50":
            raise
        import plain_resnet
        module, made = plain_resnet.make(zoo.ZOO[name].image), "plain_resnet.make (no torchvision)"
    data, exporter = zoo.export(name, module)
    return data, f"{made}, {exporter}"


def write_data(name: str, folder: Path) -> tuple[Path, Path]:
    calib = folder / "calib"
    calib.mkdir()
    xs = precision_case.calibration_inputs(name)
    for k in range(0, len(xs), precision_case.CALIB_BATCH):
        np.savez(calib / f"b{k:03d}.npz", input=xs[k:k + precision_case.CALIB_BATCH])
    test = folder / "test.npz"
    np.savez(test, input=precision_case.test_inputs(name))
    return calib, test


def find(name: str, precision: str, onnx_path: Path, calib: Path, test: Path, args) -> dict | None:
    """The record of the spec debug precision finds; None when the plain engine already meets the cosine."""
    from tensorforge.cli.main import main
    cache = calib.parent / "calibration.cache"          # one calibration serves INT8 and FP8 (FP8 reads its scales)
    argv = ["debug", "precision", str(onnx_path), f"--{precision}", "--keep=fp16", f"--calibData={calib}",
            f"--calib={cache}", f"--inputs={test}", f"--cosine={args.cosine}", f"--device={args.device}",
            f"--max-refine={args.max_refine}", f"--runs={args.runs}", f"--direction={args.direction}"] + \
        (["--verbose"] if args.verbose else [])
    out = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    text = out.getvalue()
    print(text, end="")
    spec = re.search(r"^--layerPrecisions=(\S+)$", text, re.M)
    found = re.search(r"^found: (.*)$", text, re.M)
    if code == 0 and "already meets the tolerance" in text:
        return None
    if code != 0 or spec is None:
        raise SystemExit(f"{name} {precision}: debug precision found no spec (exit {code})")
    return {"spec": spec.group(1), "found": found.group(1) if found else "", "cosine_target": args.cosine,
            "device": args.device, "seconds": round(time.perf_counter() - t0),
            "command": "tensorforge " + " ".join(argv[:2] + [f"{name}.onnx"] + argv[3:])}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="+")
    p.add_argument("--precisions", default="int8")
    p.add_argument("--cosine", type=float, default=0.992)
    p.add_argument("--device", default="cpu")
    p.add_argument("--max-refine", type=int, default=24, help="debug precision's shrinking probes (0: the prefix)")
    p.add_argument("--runs", type=int, default=20, help="latency runs of the plain and the found engine")
    p.add_argument("--direction", choices=("forward", "reverse"), default="forward",
                   help="debug precision's search: the shortest prefix (forward) or suffix (reverse) of the layers")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)
    specs = json.loads(precision_case.SPECS_FILE.read_text()) if precision_case.SPECS_FILE.exists() else {}
    for name in args.models:
        data, made = model_onnx(name)
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            onnx_path = folder / f"{name}.onnx"
            onnx_path.write_bytes(data)
            calib, test = write_data(name, folder)
            for precision in [x for x in args.precisions.split(",") if x]:
                rec = find(name, precision, onnx_path, calib, test, args)
                if rec is None:
                    print(f"{name} {precision}: the plain engine meets cosine {args.cosine}: no spec needed")
                    specs.get(name, {}).pop(precision, None)
                    continue
                rec["model"] = made
                rec["script"] = "PYTHONPATH=. python3 bench/find_precision_spec.py " + " ".join(argv or sys.argv[1:])
                specs.setdefault(name, {})[precision] = rec
                precision_case.SPECS_FILE.write_text(json.dumps(specs, indent=1) + "\n")
                print(f"{name} {precision}: recorded in {precision_case.SPECS_FILE.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
