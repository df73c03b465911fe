"""The quantized store shared by the kernels that write the next GEMM's codes beside (or instead of) their float
output: LayerNorm, AddLayerNorm and flash attention (LayerNormalizationQuantize, AddLayerNormalizationQuantize,
AttentionQuantize; passes/rules/qdq_producer.py).

    q = saturate(round_half_even(y / s) + z)      of y AS STORED (rounded to the float output's dtype first)

so the codes equal QuantizeLinear applied to the float tensor the unfused graph would have written, bit for bit.
Traffic of the store: 1 byte per element, against the unfused 2 (write y) + 2 (read y) + 1 (write q).
Entry points: `store_codes` (Triton, inside a kernel), `coded_output` (a launcher's codes tensor and the store's
arguments), `quant_args` (the scalars alone), `quant_attrs` (a fused layer's `quant` dict for the launchers).
"""

import torch
import triton
import triton.language as tl

from ..ir import dtype_from_name
from ..ir.ops.low_precision import INT_RANGES
from .quant_math import _quantize_r, reciprocal_scale


@triton.jit
def store_codes(ptr, y, mask, q_scale, q_r, q_zp, q_lo, q_hi, KIND: tl.constexpr):
    """QuantizeLinear of y as stored (its float16/bfloat16/float32 value), bit-exact to the reference; KIND 1 writes
    int8/uint8 codes, 2 float8 E4M3."""
    q = _quantize_r(y.to(tl.float32), q_scale, q_r, q_zp, q_lo, q_hi, KIND)
    if KIND == 1:
        q = q.to(tl.int32)
    tl.store(ptr, q.to(ptr.dtype.element_ty), mask=mask)


def quant_args(scale: float, zero_point, qdt: torch.dtype, prefix: str = "q_") -> dict:
    """The kernel arguments of a per-tensor quantized store (store_codes): scale, its reciprocal, zero point and the
    integer range as floats (unused for float8), and the kind (1 int8/uint8, 2 float8 E4M3) as <PREFIX>KIND."""
    lo, hi = INT_RANGES.get(qdt, INT_RANGES[torch.int8])
    return {f"{prefix}scale": float(scale), f"{prefix}r": reciprocal_scale(scale), f"{prefix}zp": float(zero_point),
            f"{prefix}lo": float(lo), f"{prefix}hi": float(hi),
            f"{prefix.rstrip('_').upper()}_KIND": 2 if qdt == torch.float8_e4m3fn else 1}


def coded_output(quant: dict, shape, device, stride=None, pointer: str = "Q", prefix: str = "q_",
                 store_flag: str = "STORE_Y") -> tuple[torch.Tensor, dict]:
    """(codes, kernel keyword arguments) of a launcher's quantized store: the codes tensor (`shape`, laid out by
    `stride` when given, else contiguous) in the Q's dtype, passed as `pointer`, with the store's scalars and
    `store_flag` = whether the float output the codes come from is written too (quant["store_y"])."""
    qdt = dtype_from_name(quant["dtype"])
    codes = (torch.empty(shape, dtype=qdt, device=device) if stride is None
             else torch.empty_strided(shape, stride, dtype=qdt, device=device))
    return codes, {pointer: codes, store_flag: quant.get("store_y", True),
                   **quant_args(quant["scale"], quant["zero_point"], qdt, prefix)}


def quant_attrs(layer) -> dict:
    """The launchers' `quant` of a fused -Quantize layer: its per-tensor Q, and whether the float output is written
    (the layer's first output is absent when only the Q read it)."""
    a = layer.attrs
    return {"scale": a["q_scale"], "zero_point": a["q_zero_point"], "dtype": a["q_dtype"],
            "store_y": bool(layer.outputs and layer.outputs[0])}
