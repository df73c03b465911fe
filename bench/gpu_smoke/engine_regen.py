"""GPU smoke (issue 13.1): an engine stores its chains' programs, never kernel source; a fresh process regenerates
the Triton source at load and runs it.

    PYTHONPATH=. python3 bench/gpu_smoke/engine_regen.py        (H200; < 90 s; exit 1 on any FAIL)
    PYTHONPATH=. python3 bench/gpu_smoke/engine_regen.py --cpu  (the script's logic on a CPU: tactics set as a GPU
                                                                 build sets them, kernels in Triton's interpreter)

Per model — the seed GELU-twice model (opset 11: Div/Erf/Add/Mul/Mul ×2 → one generated chain) and a small CNN
(conv → BN → SiLU, then tanh(z + y)·σ(y)·γ + 0.1·y: a chain beside the convolutions) — built fp16 on CUDA:
  built      at least one PointwiseChain runs pointwisechain.triton_generated, and the file holds no source text;
  reloaded   a fresh subprocess `tfg.load`s the file (regenerating each chain's source from its layer data): every
             generated layer keeps its tactic (none substituted), and its output matches onnxruntime's CPU fp32
             output within max|Δ| ≤ 1e-2·(1 + max|ref|) (fp16 storage between layers);
  crafted    the same file with kernel source put back into its manifest (checksum recomputed) fails to load with
             EngineFileError in a fresh process, and the payload's marker file does not exist.
"""

import hashlib
import io
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import tensorforge as tfg  # noqa: E402

CPU_TRIAL = "--cpu" in sys.argv
DEVICE = "cpu" if CPU_TRIAL else "cuda"
GENERATED = "pointwisechain.triton_generated"
HEADER = struct.Struct("<8sIQQ32s")
FAILS: list[str] = []


def line(ok: bool, name: str, msg: str) -> None:
    print(f"{'PASS' if ok else 'FAIL'} {name} {msg}", flush=True)
    if not ok:
        FAILS.append(name)


class GeluTwice(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(torch.nn.functional.gelu(x))


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.b1 = torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16)
        self.c2, self.b2 = torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.BatchNorm2d(16)
        self.gamma = torch.nn.Parameter(torch.linspace(0.5, 1.5, 16).reshape(1, 16, 1, 1))

    def forward(self, x):
        y = torch.nn.functional.silu(self.b1(self.c1(x)))
        z = self.b2(self.c2(y))
        return torch.tanh(z + y) * torch.sigmoid(y) * self.gamma + 0.1 * y    # more than a conv epilogue takes


def export(module, x) -> bytes:
    buf = io.BytesIO()
    torch.onnx.export(module.eval(), (x,), buf, dynamo=False, opset_version=11 if isinstance(module, GeluTwice) else 17,
                      input_names=["x"], output_names=["y"])
    return buf.getvalue()


def unpack(data: bytes):
    _, version, m, w, _ = HEADER.unpack_from(data)
    body = data[HEADER.size:]
    return version, json.loads(body[:m]), body[m:m + w]


def pack(version: int, manifest: dict, weights: bytes) -> bytes:
    mbytes = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    return HEADER.pack(b"TFGENGIN", version, len(mbytes), len(weights), hashlib.sha256(mbytes + weights).digest()) \
        + mbytes + weights


CHILD = r'''
import json, sys, time
import numpy as np, torch
t0 = time.perf_counter()
import tensorforge as tfg
from tensorforge.util.errors import EngineFileError
if sys.argv[3] == "1":          # --cpu trial: the generated tactic's device check passes on the CPU
    from tensorforge.kernels import triton_pointwise
    triton_pointwise.triton_device_reason = lambda device: None
try:
    engine = tfg.load(sys.argv[1], device=sys.argv[4])
    ctx = engine.context
    t1 = time.perf_counter()
    y = engine.run({"x": torch.from_numpy(np.load(sys.argv[2])).to(sys.argv[4])})["y"]
    if y.is_cuda:
        torch.cuda.synchronize()
    t2 = time.perf_counter()
    np.save(sys.argv[2] + ".out.npy", y.float().cpu().numpy())
    print("RESULT" + json.dumps({"tactics": [l.tactic for l in engine.data.layers], "substituted": ctx.substituted,
                                 "load_s": t1 - t0, "first_run_s": t2 - t1}))
except EngineFileError as e:
    print("RESULT" + json.dumps({"error": str(e)}))
'''


def child(path: Path, x_path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if CPU_TRIAL:
        env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path), str(x_path), "1" if CPU_TRIAL else "0", DEVICE],
                          capture_output=True, text=True, env=env, timeout=120)
    if proc.returncode != 0 or "RESULT" not in proc.stdout:
        return {"crash": proc.stderr[-600:]}
    return json.loads(proc.stdout.split("RESULT", 1)[1])


def as_gpu_build(data: bytes) -> bytes:
    """--cpu trial only: chain layers get the generated tactic a CUDA build gives them."""
    version, manifest, weights = unpack(data)
    for layer in manifest["layers"]:
        if layer["op"] == "PointwiseChain":
            layer["tactic"] = GENERATED + "[BLOCK=1024,warps=4]"
    return pack(version, manifest, weights)


def check_model(name: str, module, x: torch.Tensor, folder: Path) -> None:
    import onnxruntime as ort
    model = export(module, x)
    t0 = time.perf_counter()
    engine = tfg.build(model, fp16=not CPU_TRIAL, device=DEVICE)
    build_s = time.perf_counter() - t0
    data = engine.serialize()
    if CPU_TRIAL:
        data = as_gpu_build(data)
    version, manifest, weights = unpack(data)
    chains = [la for la in manifest["layers"] if la["op"] == "PointwiseChain"]
    generated = [la["name"] for la in chains if (la["tactic"] or "").startswith(GENERATED)]
    text = json.dumps(manifest)
    no_source = "kernel_sources" not in manifest and "tl.load" not in text and "triton.jit" not in text
    line(bool(generated) and no_source, f"{name}.built",
         f"{len(generated)}/{len(chains)} chains generated, no source in file: {no_source}, build {build_s:.1f} s")

    path, x_path = folder / f"{name}.engine", folder / f"{name}.x.npy"
    path.write_bytes(data)
    np.save(x_path, x.numpy())
    got = child(path, x_path)
    if "tactics" not in got:
        line(False, f"{name}.reloaded", f"child: {got}")
    else:
        y = np.load(str(x_path) + ".out.npy")
        want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})[0]
        err = float(np.abs(y - want).max()) if y.shape == want.shape else float("inf")
        bound = 1e-2 * (1 + float(np.abs(want).max()))
        kept = [t for t, la in zip(got["tactics"], manifest["layers"]) if la["name"] in generated]
        ok = err <= bound and not got["substituted"] and all(t.startswith(GENERATED) for t in kept)
        line(ok, f"{name}.reloaded", f"max|Δ| {err:.2e} (bound {bound:.2e}) vs onnxruntime fp32, "
             f"{len(kept)} generated layers kept, substituted {got['substituted'] or 'none'}, "
             f"load {got['load_s']:.2f} s, first run {got['first_run_s']:.2f} s (Triton compiles here)")

    marker = folder / f"{name}.marker"
    payload = f"open({str(marker)!r}, 'w').write('ran')".replace('"', "'")
    source = (f'import triton\n\n@triton.jit\ndef pointwise_kernel(x: eval("{payload}")):\n    pass\n\n'
              '@triton.jit\ndef eval(x):\n    pass\n')
    key = hashlib.sha256(source.encode()).hexdigest()
    manifest["kernel_sources"] = {key: source}
    for la in chains:
        la["attrs"]["kernel"] = key
    crafted = folder / f"{name}.crafted.engine"
    crafted.write_bytes(pack(version, manifest, weights))
    got = child(crafted, x_path)
    line("error" in got and not marker.exists(), f"{name}.crafted",
         f"load: {got.get('error', got)!s:.160}; marker exists: {marker.exists()}")


def main() -> int:
    if not CPU_TRIAL and not torch.cuda.is_available():
        print("FAIL setup no CUDA device (use --cpu to try the script's logic)")
        return 1
    torch.manual_seed(0)
    folder = Path(tempfile.mkdtemp(prefix="tfg_regen_"))
    t0 = time.perf_counter()
    big = not CPU_TRIAL        # on the GPU, sizes where the generated kernel is the timed winner
    check_model("seed_gelu", GeluTwice(), torch.randn(256 if big else 64, 4096 if big else 1024), folder)
    cnn = SmallCNN()
    with torch.no_grad():
        for bn in (cnn.b1, cnn.b2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 1.5)
    check_model("small_cnn", cnn, torch.randn(8 if big else 2, 3, 64 if big else 32, 64 if big else 32), folder)
    print(f"{'FAIL' if FAILS else 'PASS'} engine_regen total {time.perf_counter() - t0:.1f} s"
          f"{' (failed: ' + ', '.join(FAILS) + ')' if FAILS else ''}")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
