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
