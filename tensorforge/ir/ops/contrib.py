"""onnxruntime contrib ops (com.microsoft) that are not the same math as an existing IR op.

    MatMulIntegerToFloat  Y = ((A − a_zp) · (B − b_zp)) · (a_scale · b_scale) + bias
        A int8/uint8 (…, M, K); B int8/uint8 (K, N); scales/zero points per tensor or per column of B (N,).
        The integer products are summed exactly (float64 holds |Σ| < 2^53), then scaled in float32 as
        onnxruntime does (int32 accumulator · float scale).
The others (FastGelu, BiasGelu, QuickGelu, SkipLayerNormalization, FusedMatMul, DynamicQuantizeMatMul) are imported
as existing ops: parser/importers/contrib.py.
"""

import torch

from ..opspec import op


def _zp(z, like):
    return torch.zeros((), dtype=torch.float64, device=like.device) if z is None else z.to(torch.float64)


@op("MatMulIntegerToFloat",
    infer=lambda a, b, sa, sb, za=None, zb=None, bias=None: torch.empty(*a.shape[:-1], b.shape[-1], dtype=sa.dtype,
                                                                         device="meta"))
def matmul_integer_to_float(a, b, a_scale, b_scale, a_zero_point=None, b_zero_point=None, bias=None):
    acc = (a.to(torch.float64) - _zp(a_zero_point, a)) @ (b.to(torch.float64) - _zp(b_zero_point, b))
    y = acc.to(torch.float32) * (a_scale.to(torch.float32) * b_scale.to(torch.float32))
    if bias is not None:
        y = y + bias.to(torch.float32)
    return y.to(a_scale.dtype)


def _unpack(packed: torch.Tensor, bits: int, count: int) -> torch.Tensor:
    """(…, bytes) uint8 → (…, count) integers: each byte holds 8/bits values, lowest bits first."""
    per = 8 // bits
    p = packed.to(torch.int32)
    vals = torch.stack([(p >> (bits * j)) & ((1 << bits) - 1) for j in range(per)], dim=-1)
    return vals.reshape(*packed.shape[:-1], -1)[..., :count]


def dequantize_nbits(b, scales, zero_points, *, K, N, bits, block_size) -> torch.Tensor:
    """MatMulNBits weights → float (N, K): W[n, k] = (q[n, k] − zp[n, k // bs]) · scale[n, k // bs]; the default zero
    point is 2^(bits−1); packed (uint8) zero points hold 8/bits blocks per byte, float ones are used as they are."""
    blocks = (K + block_size - 1) // block_size
    q = _unpack(b.reshape(N, blocks, -1), bits, block_size).to(torch.float32)          # (N, blocks, bs)
    s = scales.reshape(N, blocks, 1).to(torch.float32)
    if zero_points is None:
        z = torch.full((), float(1 << (bits - 1)), device=b.device)
    elif zero_points.dtype == torch.uint8:
        z = _unpack(zero_points.reshape(N, -1), bits, blocks).to(torch.float32).reshape(N, blocks, 1)
    else:
        z = zero_points.reshape(N, blocks, 1).to(torch.float32)
    return ((q - z) * s).reshape(N, -1)[:, :K]


@op("MatMulNBits", attrs={"K": None, "N": None, "bits": 4, "block_size": None},
    infer=lambda a, b, scales, zp=None, g_idx=None, bias=None, *, N, **_: torch.empty(*a.shape[:-1], N, dtype=a.dtype,
                                                                                    device="meta"))
def matmul_nbits(a, b, scales, zero_points=None, g_idx=None, bias=None, *, K, N, bits=4, block_size):
    """Y = A · Wᵀ (+ bias) with W from `dequantize_nbits` (com.microsoft MatMulNBits, no g_idx)."""
    w = dequantize_nbits(b, scales, zero_points, K=K, N=N, bits=bits, block_size=block_size)
    y = a.to(torch.float32) @ w.T
    if bias is not None:
        y = y + bias.to(torch.float32)
    return y.to(a.dtype)
