"""Tactics for the Q/DQ layers that run as written (no quantized kernel absorbed them): QuantizeLinear and
DequantizeLinear, per tensor or per axis (not blocked), for int8/uint8 and float8 E4M3.

    Q:  y = saturate(round_half_even(x / s) + z)          DQ:  y = (x − z) · s
Both rank below the reference and run where tactics are timed (CUDA), after fits() has seen the element types.
`torch_float`: the reference's arithmetic in the scale's own float type (no float64/int64 intermediates:
1 + 1 bytes per element of int traffic instead of 8 + 8), bit-exact to it. `triton_qdq` (CUDA, float32 scales):
one pass over a dense input in its own memory order — read 2–4 bytes, write 1 (Q) or 4 (DQ) per element — with
IEEE division and the 1.5·2²³ round-half-even, bit-exact as well.
"""

import torch
import triton
import triton.language as tl

from ..ir import dtype_from_name
from ..ir.ops.low_precision import INT_RANGES
from ..ir.ops.quant import _broadcast
from .registry import tactic, triton_device_reason
from .torch_fused import dense_order
from .quant_math import _quantize

_TYPES = (torch.int8, torch.uint8, torch.float8_e4m3fn)


def _q_dtype(layer, zp):
    if zp is not None:
        return zp.dtype
    out = layer.attrs.get("output_dtype")
    return dtype_from_name(out) if out else torch.uint8


def _reason(layer) -> str | None:
    a = layer.attrs
    if a.get("block_size", 0):
        return "blocked scales run on the reference"
    if layer.op == "QuantizeLinear" and a.get("precision"):
        return f"precision={a['precision']} runs on the reference"
    return None


def torch_quantize(x, s, zp, layer):
    out = _q_dtype(layer, zp)
    if out not in _TYPES:
        raise TypeError(f"layer {layer.name!r}: {out} output; torch_float quantizes to int8/uint8/fp8")
    a = layer.attrs
    sb = _broadcast(s, x, a.get("axis", 1), 0)
    q = x.to(sb.dtype) / sb
    if out == torch.float8_e4m3fn:
        if not a.get("saturate", 1):
            raise TypeError(f"layer {layer.name!r}: saturate=0 runs on the reference")
        big = torch.finfo(out).max
        return q.float().clamp(-big, big).to(out)
    lo, hi = INT_RANGES[out]
    r = torch.round(q).float()
    if zp is not None:
        r = r + _broadcast(zp, x, a.get("axis", 1), 0).float()
    return r.clamp(lo, hi).to(out)


def torch_dequantize(x, s, zp, layer):
    if x.dtype not in _TYPES:
        raise TypeError(f"layer {layer.name!r}: {x.dtype} input; torch_float dequantizes int8/uint8/fp8")
    a = layer.attrs
    out = dtype_from_name(a["output_dtype"]) if a.get("output_dtype") else s.dtype
    sb = _broadcast(s, x, a.get("axis", 1), 0)
    if x.dtype == torch.float8_e4m3fn:
        v = x.float()
        if zp is not None:
            v = v - _broadcast(zp, x, a.get("axis", 1), 0).float()
        return (v.to(out) * sb.to(out)).to(out)
    v = x.to(torch.int32)
    if zp is not None:
        v = v - _broadcast(zp, x, a.get("axis", 1), 0).to(torch.int32)
    return (v.to(out) * sb.to(out)).to(out)


def _inputs(inputs):
    return inputs[0], inputs[1], inputs[2] if len(inputs) > 2 else None


def _fits_torch(layer, cfg, inputs):
    x, s, zp = _inputs(inputs)
    dt = _q_dtype(layer, zp) if layer.op == "QuantizeLinear" else x.dtype
    return None if dt in _TYPES else f"{dt} is not int8/uint8/fp8"


# Below torch_ref's priority: supports() cannot see the element types, so these run only where the builder times
# tactics (CUDA), after fits() has seen the opt-point inputs; an untimed (CPU, level-0) build keeps the reference.
@tactic("QuantizeLinear", name="torch_float", priority=-110)
class TorchQuantize:
    supports = staticmethod(lambda layer, device: _reason(layer))
    fits = staticmethod(_fits_torch)

    @staticmethod
    def build(layer, cfg, device):
        return lambda inputs: [torch_quantize(*_inputs(inputs), layer)]


@tactic("DequantizeLinear", name="torch_float", priority=-110)
class TorchDequantize:
    supports = staticmethod(lambda layer, device: _reason(layer))
    fits = staticmethod(_fits_torch)

    @staticmethod
    def build(layer, cfg, device):
        return lambda inputs: [torch_dequantize(*_inputs(inputs), layer)]


@triton.jit
def _qdq_kernel(X, S, Z, Y, numel, stride_c, C, lo, hi, QUANT: tl.constexpr, KIND: tl.constexpr,
                HAS_ZP: tl.constexpr, BLOCK: tl.constexpr):
    """Flat over the dense storage of X (and Y, same strides); channel = (offset // stride_c) % C."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    ch = (offs // stride_c) % C
    s = tl.load(S + ch, mask=mask, other=1.0)
    if HAS_ZP:
        z = tl.load(Z + ch, mask=mask, other=0).to(tl.float32)
    else:
        z = tl.zeros([BLOCK], dtype=tl.float32)
    x = tl.load(X + offs, mask=mask)          # masked lanes are never stored
    if QUANT:
        y = _quantize(x.to(tl.float32), s, z, lo, hi, KIND)
        if KIND == 1:
            y = y.to(tl.int32)
        tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=mask)
    else:
        if KIND == 2:
            v = x.to(tl.float32) - z
        else:
            v = (x.to(tl.int32) - z.to(tl.int32)).to(tl.float32)
        tl.store(Y + offs, (v * s).to(Y.dtype.element_ty), mask=mask)


def _dense(t: torch.Tensor) -> bool:
    return dense_order(t) is not None


def triton_qdq(layer, inputs, block=1024, interpret=False):
    x, s, zp = _inputs(inputs)
    quant = layer.op == "QuantizeLinear"
    if s.dtype != torch.float32 or not _dense(x) or (quant and x.dtype not in (torch.float32, torch.float16,
                                                                              torch.bfloat16)):
        raise TypeError(f"layer {layer.name!r}: triton_qdq takes a dense input and float32 scales")
    out_dt = _q_dtype(layer, zp) if quant else (dtype_from_name(layer.attrs["output_dtype"])
                                                if layer.attrs.get("output_dtype") else s.dtype)
    qdt = out_dt if quant else x.dtype
    if not quant and out_dt != torch.float32:
        raise TypeError(f"layer {layer.name!r}: triton_qdq dequantizes to float32, not {out_dt}")
    if qdt not in _TYPES:
        raise TypeError(f"layer {layer.name!r}: {qdt}; triton_qdq handles int8/uint8/fp8")
    axis = layer.attrs.get("axis", 1) % max(x.dim(), 1)
    per_axis = s.numel() > 1
    y = torch.empty_like(x, dtype=out_dt)
    lo, hi = (0.0, 255.0) if qdt == torch.uint8 else (-128.0, 127.0)
    kind = 2 if qdt == torch.float8_e4m3fn else 1
    n = x.numel()
    sv = s.reshape(-1)
    zv = zp.reshape(-1) if zp is not None else sv
    if zp is not None and zp.dtype == torch.float8_e4m3fn:
        zv = zp.reshape(-1).float()
    grid = (triton.cdiv(n, block),)
    opts = {} if interpret else {"num_warps": 4}
    _qdq_kernel[grid](x, sv, zv, y, n, x.stride(axis) if per_axis else 1, sv.numel(), lo, hi, QUANT=quant,
                      KIND=kind, HAS_ZP=zp is not None, BLOCK=block, **opts)
    return y


def _fits(layer, cfg, inputs):
    x, s, zp = _inputs(inputs)
    if s.dtype != torch.float32:
        return f"scale is {s.dtype}; the Triton kernel divides in float32"
    if not _dense(x):
        return "the input is not dense"
    dt = _q_dtype(layer, zp) if layer.op == "QuantizeLinear" else x.dtype
    if layer.op == "DequantizeLinear" and layer.attrs.get("output_dtype") not in (None, "float32"):
        return f"output_dtype={layer.attrs['output_dtype']}: the kernel writes float32"
    return None if dt in _TYPES else f"{dt} is not int8/uint8/fp8"


for _op in ("QuantizeLinear", "DequantizeLinear"):
    class _TritonQDQ:
        supports = staticmethod(lambda layer, device: triton_device_reason(device) or _reason(layer))
        fits = staticmethod(_fits)

        @staticmethod
        def build(layer, cfg, device):
            return lambda inputs: [triton_qdq(layer, inputs, cfg["BLOCK"])]
    tactic(_op, name="triton_qdq", configs=[{"BLOCK": 1024}, {"BLOCK": 4096}], priority=-120)(_TritonQDQ)
