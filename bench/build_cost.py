"""Case 3/5 of BENCH.md: engine build time with a cold timing cache, then with the warm one it left behind, for
every zoo model, beside torch.compile's compile time for the same model in the same run (filled in by run.py from
the model's batch-1 zoo row: the first call of the compiled module, synchronised).

Entry points: `run_case(onnx_bytes, shapes, fp16, log, ...)` → (result dict, the cold-built engine) — run.py hands
the engine to the model's batch-1 row, so the cold build is not paid twice; `onnx_light_models()` → the ONNX
model-zoo architectures shipped inside the onnx package (backend test "light" models), available offline.
"Cold" = a new timing cache file; the process is warm (CUDA context, cuDNN), and run.py points Triton's and
inductor's on-disk caches at a new folder for the run, so the first build of a model compiles its kernels (one
compiled for an earlier model of the same run may be reused, as it would be on a user's machine).
"""

import os
import time

import tensorforge as tfg


def run_case(onnx_bytes: bytes, shapes: dict, fp16: bool, log, device: str = "cuda", cache_path: str | None = None,
             label: str = "") -> tuple[dict, object]:
    """Cold build into `cache_path` (must not exist yet; a temporary file when None), then a warm build from it."""
    import tempfile
    tmp = None
    if cache_path is None:
        tmp = tempfile.TemporaryDirectory()
        cache_path = os.path.join(tmp.name, "timing.json")
    if os.path.exists(cache_path):
        os.remove(cache_path)
    try:
        t0 = time.perf_counter()
        cold = tfg.build(onnx_bytes, fp16=fp16, shapes=shapes, device=device, timing_cache=cache_path)
        cold_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        warm = tfg.build(onnx_bytes, fp16=fp16, shapes=shapes, device=device, timing_cache=cache_path)
        warm_s = time.perf_counter() - t0
        entries = os.path.getsize(cache_path) if os.path.exists(cache_path) else 0
    finally:
        if tmp is not None:
            tmp.cleanup()
    same = [a.tactic for a in cold.data.layers] == [b.tactic for b in warm.data.layers]
    out = {"cold_s": round(cold_s, 3), "warm_s": round(warm_s, 3), "speedup": round(cold_s / warm_s, 2),
           "cold_tactics": cold.data.build_info.get("tactics"), "warm_tactics": warm.data.build_info.get("tactics"),
           "same_tactics": same, "cache_bytes": entries, "fp16": fp16,
           "shapes": {k: [list(s) if isinstance(s, (tuple, list)) else s for s in v] if _ranged(v) else list(v)
                      for k, v in shapes.items()}}
    log(f"build cost{' ' + label if label else ''}: cold {cold_s:.2f} s, warm {warm_s:.2f} s ({out['speedup']}x), "
        f"same tactics: {same}")
    return out, cold


def _ranged(spec) -> bool:
    return len(spec) == 3 and all(isinstance(s, (tuple, list)) for s in spec)


def onnx_light_models() -> dict[str, str]:
    """name → path of the 'light' model-zoo ONNX files (architectures nobody here wrote) inside the onnx package."""
    import onnx
    folder = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    if not os.path.isdir(folder):
        return {}
    return {f[:-5]: os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f.endswith(".onnx")}


def static_shapes(path: str) -> dict:
    """The graph inputs' static shapes (the light models are all static); an error names a symbolic dimension."""
    import onnx
    model = onnx.load(path, load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    out = {}
    for inp in model.graph.input:
        if inp.name in inits:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else None for d in inp.type.tensor_type.shape.dim]
        if any(d is None for d in dims):
            raise ValueError(f"{os.path.basename(path)}: input {inp.name!r} has a symbolic dimension")
        out[inp.name] = tuple(dims)
    return out
