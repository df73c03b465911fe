"""The seed flow, end to end: PyTorch → ONNX → (custom plugin) → engine → benchmark → compare.

For each of three exports of the seed model (model.py):
  legacy  — torch.onnx.export(dynamo=False, opset 11): Div, Erf, Add, Mul, Mul per GELU
  dynamo  — torch.onnx.export(dynamo=True, opset 20): one Gelu node per GELU
  plugin  — the autograd Function whose symbolic emits custom::MyGelu (a tensorforge library plugin)
it runs `tensorforge exec --onnx=… --saveEngine=…` (build), then `tensorforge exec --loadEngine=… --loadInputs=…`
(benchmark), loads the saved engine with `tfg.load` and compares its output with onnxruntime (legacy, dynamo)
or PyTorch (plugin: onnxruntime has no kernel for custom::MyGelu). Runs on CUDA when present, else CPU.

    python examples/gelu/run.py [--elements N] [--out DIR] [--iterations N]
"""

import argparse
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from model import MyNet, MyNetPlugin  # noqa: E402

import tensorforge as tfg  # noqa: E402


def export(module, x, path: Path, dynamo: bool, opset: int) -> None:
    """Export with a dynamic first dimension; the engine is built for the benchmark's shape."""
    if dynamo:
        rows = torch.export.Dim("rows")
        torch.onnx.export(module, (x,), dynamo=True, opset_version=opset, input_names=["x"], output_names=["y"],
                          dynamic_shapes={"x": {0: rows}}).save(str(path))
    else:
        torch.onnx.export(module, (x,), str(path), dynamo=False, opset_version=opset, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "rows"}, "y": {0: "rows"}})


def tensorforge(*args: str) -> str:
    cmd = [sys.executable, "-m", "tensorforge", "exec", *args]
    print("$ tensorforge exec " + " ".join(args), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"tensorforge exec failed with exit code {proc.returncode}")
    return proc.stdout


def summary_line(log: str, key: str) -> str:
    for line in log.splitlines():
        if key in line:
            return line.split("]", 2)[-1].strip() if "]" in line else line.strip()
    return "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--elements", type=int, default=None, help="elements of x (default: 2^28 on CUDA, 2^18 on CPU)")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--out", default=str(HERE / "out"))
    args = ap.parse_args()
    cuda = torch.cuda.is_available()
    n = args.elements or (1 << 28 if cuda else 1 << 18)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    x = torch.randn(n // 1024, 1024)
    np.save(out / "x.npy", x.numpy())
    reference = torch.nn.functional.gelu(torch.nn.functional.gelu(x))
    print(f"device: {'cuda' if cuda else 'cpu'}; x: {tuple(x.shape)} float32 ({x.numel() * 4 / 2**20:.0f} MiB)")

    rows = []
    cases = [("legacy", MyNet(), False, 11), ("dynamo", MyNet(), True, 20), ("plugin", MyNetPlugin(), False, 17)]
    for name, module, dynamo, opset in cases:
        onnx_path, engine_path = out / f"gelu_{name}.onnx", out / f"gelu_{name}.engine"
        export(module, x[:4], onnx_path, dynamo, opset)   # the build gets the real shape below
        shape = f"x:{x.shape[0]}x{x.shape[1]}"
        tensorforge(f"--onnx={onnx_path}", f"--saveEngine={engine_path}", f"--shapes={shape}", "--skipInference")
        log = tensorforge(f"--loadEngine={engine_path}", f"--loadInputs=x:{out / 'x.npy'}",
                          f"--iterations={args.iterations}", "--duration=0", "--warmUp=100")
        got = tfg.load(engine_path).run({"x": x})["y"].cpu().numpy().reshape(-1)   # the saved engine, in-process
        if name == "plugin":
            want, oracle = reference.numpy().reshape(-1), "torch"
        else:
            import onnxruntime as ort
            sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
            want, oracle = sess.run(None, {"x": x.numpy()})[0].reshape(-1), "onnxruntime"
        err = float(np.max(np.abs(got - want)))
        ok = np.allclose(got, want, rtol=1e-3, atol=1e-4)
        rows.append((name, summary_line(log, "GPU Compute Time:"), oracle, err, ok))

    print("\n=== seed GELU example ===")
    for name, compute, oracle, err, ok in rows:
        print(f"{name:<7} {compute}\n        vs {oracle}: max |diff| {err:.3g} -> {'OK' if ok else 'MISMATCH'}")
    return 0 if all(r[-1] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
