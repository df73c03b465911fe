"""The float16 GELU oracle shared by the codegen tests: every float16 value, the float64 GELU x·Φ(x) (torch's
ndtr; GELU(−inf) = −0), ulp distances in float16 value order, and a numpy model of the lean-grade GELU as the
GPU evaluates it (float32, one rounding per FFMA, exp2 off by a chosen number of ulps)."""

import numpy as np
import torch

from tensorforge.codegen.fastmath import LO_CLAMP, LO_LOG2_TAIL

ALL = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.float16)


def exact_gelu(x64: np.ndarray) -> np.ndarray:
    """x·Φ(x) in float64; GELU(−inf) = −0 (the limit)."""
    t = torch.from_numpy(x64)
    y = (t * torch.special.ndtr(t)).numpy()
    return np.where(np.isneginf(x64), -0.0, y)


def ordered(h: np.ndarray) -> np.ndarray:
    """float16 bit patterns as integers in value order (±0 both 0), so |a − b| counts ulps."""
    b = h.astype(np.float16).view(np.int16).astype(np.int64)
    return np.where(b < 0, -(b & 0x7FFF), b)


def ulps_off(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    want = exact.astype(np.float16)                     # numpy rounds float64 → float16 correctly, in one step
    nan_ok = np.isnan(want) == np.isnan(got.astype(np.float16))
    assert nan_ok.all(), "NaN where the exact GELU is not (or the reverse)"
    d = np.abs(ordered(got) - ordered(want))
    return np.where(np.isnan(want), 0, d)


def fma_model(x: np.ndarray, ex2_ulps: int = 0, coefs=LO_LOG2_TAIL, clamp=LO_CLAMP) -> np.ndarray:
    """gelu_erf_lo as the GPU evaluates it: float32 values, one rounding per FFMA."""
    f32 = np.float32
    fma = lambda a, b, c: (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(f32)
    a = np.where(np.isnan(x), np.nan, np.minimum(np.abs(x), f32(clamp))).astype(f32)
    p = np.full_like(a, f32(coefs[-1]))
    for c in reversed(coefs[:-1]):
        p = fma(p, a, np.full_like(a, f32(c)))
    q = np.exp2(p.astype(np.float64))
    q = (q * (1 + ex2_ulps * 2.0 ** -23)).astype(f32)
    return fma(-a, q, np.maximum(x, f32(0)))
