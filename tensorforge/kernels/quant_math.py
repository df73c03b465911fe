"""The quantized epilogue's element math, as Triton functions shared by the quantized GEMM (triton_int8_gemm.py),
the standalone Q/DQ kernel (quant_pointwise.py) and the quantized stores of fused kernels (quant_store.py).

Quantize (ONNX QuantizeLinear) of a float32 value t to scale s and zero point z, saturated to [lo, hi]:
    q = clamp(round_half_even(t / s) + z, lo, hi)      int8/uint8
    q = RN_e4m3(clamp(t / s, −448, 448))              float8 E4M3
with the IEEE quotient t / s (directly, or from r = RN(1/s) and two FMAs: `_quantize_r`), rounding by the
1.5·2²³ trick (`_rint`), and integer codes taken from the rounding add's bits (`_code_r`, no F2I). All of it
is bit-exact to the op references. The epilogue's activation (`_act`) is apply_activation's, or GELU by a fast
erf (triton_gemm.gelu_fast, the one approximate piece: ERF=fast configs only). Registers only: no memory traffic.
"""

import numpy as np
import triton
import triton.language as tl

from .triton_gemm import apply_activation, gelu_fast


def reciprocal_scale(scale) -> float:
    """RN(1 / float32(scale)) in float32 (numpy's float32 division is IEEE), as the kernel's `r`; 0 when unused."""
    s = np.float32(scale)
    return float(np.float32(1.0) / s) if s else 0.0


@triton.jit
def _rint(v):
    """v (float32, |v| < 2²²) rounded to the nearest integer, ties to even: (v + 1.5·2²³) − 1.5·2²³. The constant is
    written here rather than as a module-level tl.constexpr: Triton 3.6 merges a callee's recorded globals into the
    caller's key before it hashes the callee, so a kernel's cache key depended on which kernels the process had
    hashed before (reproduced with Triton 3.6 on the CPU: _qgemm_kernel's key with and without having hashed
    _qdq_kernel first). The build's compile workers and the parent then disagreed on every INT8 GEMM key."""
    return (v + 12582912.0) - 12582912.0


@triton.jit
def _round_e4m3(v):
    """v (float32, |v| ≤ 448) rounded to the float8 E4M3 grid, ties to even, as float32: the grid step is
    2^(max(e, −6) − 3) for v's binade e; dividing by it is exact, so the 1.5·2²³ trick rounds. (Explicit rather
    than a conversion, so it is the same on the GPU and in the interpreter.)"""
    e = ((v.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127
    step = ((tl.maximum(e, -6) - 3 + 127) << 23).to(tl.float32, bitcast=True)
    return _rint(v / step) * step


@triton.jit
def _to_grid(v, zp, lo, hi, KIND: tl.constexpr):
    """The quotient v = x / scale on the output grid, as float values: KIND 1 integer, saturated to [lo, hi] after
    adding zp (clamped to [lo − zp, hi − zp] before rounding: the bounds are integers and rounding is monotone, so
    this equals clamping after; |v| ≤ 2²² then, where the 1.5·2²³ trick rounds), KIND 2 float8 E4M3."""
    if KIND == 2:
        return _round_e4m3(tl.minimum(tl.maximum(v, -448.0), 448.0))
    v = tl.minimum(tl.maximum(v, lo - zp), hi - zp)
    return _rint(v) + zp


@triton.jit
def _quantize(t, scale, zp, lo, hi, KIND: tl.constexpr):
    """ONNX QuantizeLinear of a float32 tile (IEEE division), as float values: KIND 1 integer, 2 float8 E4M3."""
    return _to_grid(tl.math.div_rn(t, scale), zp, lo, hi, KIND)


@triton.jit
def _quotient_r(t, scale, rscale):
    """RN(t / scale) from rscale = RN(1/scale) (reciprocal_scale): q0 = t·r, the remainder e = fma(−q0, scale, t) is
    exact, and fma(e, r, q0) is the IEEE quotient (Markstein's theorem; normal range). One FMUL and two FFMA per
    element where div.rn emits a reciprocal, a check and a branch to a slow path for every element: the epilogue of
    a short-K GEMM was most of its time."""
    q0 = t * rscale
    return tl.fma(tl.fma(-q0, scale, t), rscale, q0)


@triton.jit
def _quantize_r(t, scale, rscale, zp, lo, hi, KIND: tl.constexpr):
    """_quantize with the division done from rscale (_quotient_r)."""
    return _to_grid(_quotient_r(t, scale, rscale), zp, lo, hi, KIND)


@triton.jit
def _code_r(t, scale, rscale, zp, lo, hi):
    """_quantize_r's KIND 1 code as int32 without a float→int conversion (F2I issues at 1/8 of the FMA rate on
    sm_90; it was one of ~30 epilogue instructions per element): after the clamp |v| ≤ 2²², so v + 1.5·2²³ has
    unit spacing and its bits are 0x4B400000 + round(v) (ties to even, the FADD's rounding). Same codes."""
    v = tl.minimum(tl.maximum(_quotient_r(t, scale, rscale), lo - zp), hi - zp)
    return (v + 12582912.0).to(tl.int32, bitcast=True) - 0x4B400000 + tl.cast(zp, tl.int32)


@triton.jit
def _act(t, ACT: tl.constexpr, alpha, beta, FAST_ERF: tl.constexpr):
    """The epilogue's activation: apply_activation's, or GELU with the fast erf where the config asks (ERF=fast)."""
    if FAST_ERF and ACT == "Gelu":
        return gelu_fast(t)
    return apply_activation(t, ACT, alpha, beta)
