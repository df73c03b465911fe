"""Timing for the benchmark: CUDA events per iteration (GPU), the wall clock (CPU), and summary statistics.

    cuda_times(fn)  warm-up calls, then for each of `iters` calls: event.record(); fn(); event.record() — no host
                    synchronisation between calls, so the events time the device, not the Python loop, as long as
                    the host keeps ahead of the GPU (it does for every replayed graph here).
    stats(times)    median, min, max, p10, p90, spread = (p90 − p10) / median.
    timer(device, iters, warmup)  one of the two, as a function of the callable, returning its stats.
"""

import statistics
import time


def cuda_times(fn, iters: int = 50, warmup: int = 10) -> list[float]:
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    marks = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for start, end in marks:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in marks]


def mean_ms(fn, reps: int) -> float:
    """Mean ms of `reps` back-to-back calls of `fn`, one pair of CUDA events around them all (no warm-up)."""
    import torch
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def cpu_times(fn, iters: int = 30, warmup: int = 5) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def _quantile(sorted_values: list[float], q: float) -> float:
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def stats(times: list[float]) -> dict:
    s = sorted(times)
    med = statistics.median(s)
    p10, p90 = _quantile(s, 0.1), _quantile(s, 0.9)
    return {"median_ms": round(med, 5), "min_ms": round(s[0], 5), "max_ms": round(s[-1], 5),
            "p10_ms": round(p10, 5), "p90_ms": round(p90, 5), "spread_pct": round(100 * (p90 - p10) / med, 2) if med else 0.0,
            "iters": len(s)}


def timer(device: str, iters: int, warmup: int):
    """`time_fn(fn, keep_raw=False)` → stats of `iters` calls after `warmup`: CUDA events on a GPU, the wall clock on
    the CPU. `keep_raw` adds the per-iteration times (the histograms of the report)."""
    def time_fn(fn, keep_raw: bool = False) -> dict:
        raw = cuda_times(fn, iters, warmup) if device == "cuda" else cpu_times(fn, iters, warmup)
        st = stats(raw)
        if keep_raw:
            st["raw_ms"] = [round(t, 5) for t in raw]
        return st
    return time_fn
