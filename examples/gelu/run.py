"""The seed flow, end to end: PyTorch → ONNX → (custom plugin) → engine → benchmark → compare.

For each of three exports of the seed model (model.py):
  legacy  — torch.onnx.export(dynamo=False, opset 11): Div, Erf, Add, Mul, Mul per GELU
  dynamo  — torch.onnx.export(dynamo=True, opset 20): one Gelu node per GELU
  plugin  — the autograd Function whose symbolic emits custom::MyGelu (a tensorforge library plugin)
it runs `tensorforge exec --onnx=… --saveEngine=…` (build), then `tensorforge exec --loadEngine=… --loadInputs=…`
(benchmark), loads the saved engine with `tfg.load` and compares its output with onnxruntime (legacy, dynamo)
or PyTorch (plugin: onnxruntime has no kernel for custom::MyGelu). Runs on CUDA when present, else CPU.
It prints, per export, the ONNX node count by op type → IR layers after parsing → engine layers after fusion
(the legacy export's 10 nodes become one generated kernel), and the device time's min and median as
`tensorforge exec` measured it (GPU Compute Time on CUDA, CPU Compute Time on the CPU; on a loaded machine
the min is the steadier figure). Files (ONNX models, engines, the input) go to --out (examples/gelu/out/).

    python examples/gelu/run.py [--elements N] [--out DIR] [--iterations N]
"""

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
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


def compute_times(log: str, label: str) -> tuple[float, float] | None:
    """(min, median) ms of the `<label>: min = … ms, …, median = … ms` line of `tensorforge exec`'s summary."""
    m = re.search(rf"{label}: min = ([0-9.e+-]+) ms, .*?median = ([0-9.e+-]+) ms", log)
    return (float(m.group(1)), float(m.group(2))) if m else None


def counts(items) -> str:
    """'Div 2, Erf 2, Mul 4' — op types in first-seen order with their counts."""
    return ", ".join(f"{op} {n}" for op, n in Counter(items).items())


def fusion_line(onnx_path: Path, engine) -> str:
    """ONNX nodes → IR layers right after parsing → engine layers after the passes fused them."""
    from tensorforge.parser import parse_model
    every = [n.op_type for n in onnx.load(str(onnx_path)).graph.node]
    nodes = [op for op in every if op != "Constant"]
    consts = len(every) - len(nodes)
    parsed = parse_model(str(onnx_path)).layers
    layers = [la.op for la in engine.data.layers]
    return (f"{len(nodes)} ONNX nodes ({counts(nodes)}" + (f"; and {consts} Constant nodes" if consts else "")
            + f") → {len(parsed)} IR layers after parsing → "
            f"{len(layers)} engine layer{'s' if len(layers) != 1 else ''} after fusion ({counts(layers)})")


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
    label = "GPU Compute Time" if cuda else "CPU Compute Time"
    print(f"device: {'cuda' if cuda else 'cpu'}; x: {tuple(x.shape)} float32 ({x.numel() * 4 / 2**20:.0f} MiB); "
          f"files go to {out}")

    rows = []
    cases = [("legacy", MyNet(), False, 11), ("dynamo", MyNet(), True, 20), ("plugin", MyNetPlugin(), False, 17)]
    for name, module, dynamo, opset in cases:
        onnx_path, engine_path = out / f"gelu_{name}.onnx", out / f"gelu_{name}.engine"
        export(module, x[:4], onnx_path, dynamo, opset)   # the build gets the real shape below
        shape = f"x:{x.shape[0]}x{x.shape[1]}"
        tensorforge(f"--onnx={onnx_path}", f"--saveEngine={engine_path}", f"--shapes={shape}", "--skipInference")
        log = tensorforge(f"--loadEngine={engine_path}", f"--loadInputs=x:{out / 'x.npy'}",
                          f"--iterations={args.iterations}", "--duration=0", "--warmUp=100")
        engine = tfg.load(engine_path)                                         # the saved engine, in-process
        got = engine.run({"x": x})["y"].cpu().numpy().reshape(-1)
        if name == "plugin":
            want, oracle = reference.numpy().reshape(-1), "torch"
        else:
            import onnxruntime as ort
            sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
            want, oracle = sess.run(None, {"x": x.numpy()})[0].reshape(-1), "onnxruntime"
        err = float(np.max(np.abs(got - want)))
        ok = np.allclose(got, want, rtol=1e-3, atol=1e-4)
        rows.append((name, fusion_line(onnx_path, engine), compute_times(log, label), oracle, err, ok))

    print(f"\n=== seed GELU example ({args.iterations} timed runs each; {label}, min / median) ===")
    for name, fusion, times, oracle, err, ok in rows:
        t = f"{times[0]:.4g} ms / {times[1]:.4g} ms" if times else f"not found in the log ({label})"
        print(f"{name:<7} {fusion}\n        {label}: {t}\n"
              f"        vs {oracle}: max |diff| {err:.3g} -> {'OK' if ok else 'MISMATCH'}")
    print(f"files: {out} (gelu_<export>.onnx, gelu_<export>.engine, x.npy)")
    return 0 if all(r[-1] for r in rows) and all(r[2] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
