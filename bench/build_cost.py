"""Case 3 of BENCH.md: engine build time with a cold timing cache, then with the warm one it left behind.

Both builds run in the same warmed-up process (CUDA context, cuDNN, Triton's on-disk kernel cache are already
hot from the zoo), so the difference is what the timing cache saves: the warm build re-times nothing.
"""

import os
import tempfile
import time

import tensorforge as tfg


def run_case(onnx_bytes: bytes, input_shape: tuple, fp16: bool, log) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "timing.json")
        t0 = time.perf_counter()
        cold = tfg.build(onnx_bytes, fp16=fp16, shapes={"input": input_shape}, device="cuda", timing_cache=path)
        cold_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        warm = tfg.build(onnx_bytes, fp16=fp16, shapes={"input": input_shape}, device="cuda", timing_cache=path)
        warm_s = time.perf_counter() - t0
        entries = os.path.getsize(path) if os.path.exists(path) else 0
    same = [a.tactic for a in cold.data.layers] == [b.tactic for b in warm.data.layers]
    out = {"cold_s": round(cold_s, 3), "warm_s": round(warm_s, 3), "speedup": round(cold_s / warm_s, 2),
           "cold_tactics": cold.data.build_info.get("tactics"), "warm_tactics": warm.data.build_info.get("tactics"),
           "same_tactics": same, "cache_bytes": entries}
    log(f"build cost: cold {cold_s:.2f} s, warm {warm_s:.2f} s ({out['speedup']}x), same tactics: {same}")
    return out
