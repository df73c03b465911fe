"""Quantization: QuantizeLinear, DequantizeLinear (per-tensor, per-axis, blocked), DynamicQuantizeLinear,
QLinearMatMul, QLinearConv, MatMulInteger, ConvInteger.

    QuantizeLinear:   y = saturate(round_half_even(x / scale) + zero_point)      (float8/float4: cast, no +zp)
    DequantizeLinear: y = (x - zero_point) · scale
    QLinear*:         y = saturate(round((Σ (a - a_zp)(b - b_zp)) · a_scale·b_scale / y_scale) + y_zp)

`scale`/`zero_point` are a scalar (per tensor), a 1-D tensor along `axis` (per axis), or x's shape with
dimension `axis` divided into blocks of `block_size` (blocked); `_broadcast` expands them to x's shape.
Integer products accumulate in int64 (exact), then scale in float64. Traffic: one read of x (and the
small scale/zero-point tensors), one write of y; the matmul/conv forms add their compute.
"""

import torch

from ..dtypes import dtype_from_name
from ..opspec import get_spec, op
from .low_precision import FLOAT4, FLOAT8, INT_RANGES, as_int, float4_encode, from_int, to_float, to_float8


def _broadcast(p: torch.Tensor, x: torch.Tensor, axis: int, block_size: int) -> torch.Tensor:
    """Expand a per-tensor / per-axis / blocked parameter to x's shape (sub-byte integers as their int8/uint8
    bytes: torch has no copy kernels for int4)."""
    p = as_int(p).to(x.device)
    if p.dim() == 0 or p.numel() == 1 and x.dim() <= 1 and not block_size:
        return p.reshape(())
    axis = axis % x.dim()
    if block_size:
        return p.repeat_interleave(block_size, dim=axis).narrow(axis, 0, x.shape[axis])
    shape = [1] * x.dim()
    shape[axis] = -1
    return p.reshape(shape)


@op("QuantizeLinear", attrs={"axis": 1, "block_size": 0, "saturate": 1, "output_dtype": None, "precision": None})
def quantize_linear(x, scale, zero_point=None, axis=1, block_size=0, saturate=1, output_dtype=None, precision=None):
    out = zero_point.dtype if zero_point is not None else dtype_from_name(output_dtype) if output_dtype else torch.uint8
    s = _broadcast(scale, x, axis, block_size)
    work = dtype_from_name(precision) if precision else s.dtype
    q = x.to(work) / s.to(work)
    if out in FLOAT8:
        return to_float8(q, out, bool(saturate))
    if out == FLOAT4:
        zp = 0 if zero_point is None else to_float(_broadcast(zero_point, x, axis, block_size))
        return float4_encode(q.float() + zp)
    lo, hi = INT_RANGES[out]
    v = torch.round(q.double()).to(torch.int64)
    if zero_point is not None:
        v = v + as_int(_broadcast(zero_point, x, axis, block_size)).to(torch.int64)
    return from_int(v.clamp(lo, hi), out)


@op("DequantizeLinear", attrs={"axis": 1, "block_size": 0, "output_dtype": None})
def dequantize_linear(x, scale, zero_point=None, axis=1, block_size=0, output_dtype=None):
    out = dtype_from_name(output_dtype) if output_dtype else scale.dtype
    s = _broadcast(scale, x, axis, block_size)
    if x.dtype in FLOAT8 or x.dtype == FLOAT4:
        v = to_float(x)
        if zero_point is not None:
            v = v - to_float(_broadcast(zero_point, x, axis, block_size))
        return (v.to(out) * s.to(out)).to(out)
    v = as_int(x).to(torch.int64)
    if zero_point is not None:
        v = v - as_int(_broadcast(zero_point, x, axis, block_size)).to(torch.int64)
    return (v.to(out) * s.to(out)).to(out)


@op("DynamicQuantizeLinear")
def dynamic_quantize_linear(x):
    """uint8 with scale = (max(x,0) - min(x,0)) / 255 and zero point round(-min/scale), clamped to [0, 255].
    Returns (y, y_scale, y_zero_point)."""
    xf = x.float()
    hi = torch.clamp(xf.max(), min=0.0)
    lo = torch.clamp(xf.min(), max=0.0)
    scale = torch.where(hi == lo, torch.ones_like(hi), hi - lo) / 255.0
    zp = torch.round(torch.clamp(-lo / scale, 0.0, 255.0))
    y = torch.clamp(torch.round(xf / scale) + zp, 0, 255).to(torch.uint8)
    return y, scale.to(x.dtype), zp.to(torch.uint8)


def _centered(t, zp, axis_for_vector=None):
    v = as_int(t).to(torch.int64)
    if zp is None:
        return v
    z = as_int(zp.to(t.device)).to(torch.int64)
    if axis_for_vector is not None and z.dim() == 1 and z.numel() > 1:
        shape = [1] * v.dim()
        shape[axis_for_vector] = -1
        z = z.reshape(shape)
    return v - z


def _requantize(acc, multiplier, y_zero_point, fallback_dtype):
    out = y_zero_point.dtype if y_zero_point is not None else fallback_dtype
    lo, hi = INT_RANGES[out]
    r = acc.double() * multiplier.to(acc.device).double()
    if y_zero_point is not None:
        r = r + as_int(y_zero_point.to(acc.device)).double()
    return from_int(torch.round(r.clamp(lo, hi)).to(torch.int64), out)


def _int_matmul(a, b):
    """Exact integer matmul (torch has no integer GEMM on CUDA): float64 holds every product sum of
    8-bit operands exactly for K < 2**36."""
    return torch.matmul(a.double(), b.double()).to(torch.int64)


@op("MatMulInteger")
def matmul_integer(a, b, a_zero_point=None, b_zero_point=None):
    """(a - a_zp) @ (b - b_zp) in int32; a_zp may be per row of a (1-D, along axis -2), b_zp per column."""
    av = _centered(a, a_zero_point, a.dim() - 2 if a.dim() >= 2 else None)
    bv = _centered(b, b_zero_point, b.dim() - 1)
    return _int_matmul(av, bv).to(torch.int32)


@op("QLinearMatMul")
def qlinear_matmul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point=None):
    acc = _int_matmul(_centered(a, a_zero_point), _centered(b, b_zero_point, b.dim() - 1))
    multiplier = a_scale * b_scale.to(a_scale.device) / y_scale.to(a_scale.device)
    if multiplier.dim() == 1 and multiplier.numel() > 1:     # per output column
        multiplier = multiplier.reshape(1, -1)
    return _requantize(acc, multiplier, y_zero_point, a.dtype)


_CONV_ATTRS = {"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None, "pads": None, "strides": None}


def _int_conv(x, w, attrs):
    conv = get_spec("Conv").reference
    return torch.round(conv(x.double(), w.double(), None, **attrs)).to(torch.int64)


@op("ConvInteger", attrs=dict(_CONV_ATTRS))
def conv_integer(x, w, x_zero_point=None, w_zero_point=None, **attrs):
    """Conv((x - x_zp), (w - w_zp)) in int32; w_zp may be per output channel."""
    return _int_conv(_centered(x, x_zero_point), _centered(w, w_zero_point, 0), attrs).to(torch.int32)


@op("QLinearConv", attrs=dict(_CONV_ATTRS))
def qlinear_conv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point=None, bias=None, **attrs):
    acc = _int_conv(_centered(x, x_zero_point), _centered(w, w_zero_point, 0), attrs)
    if bias is not None:
        acc = acc + bias.to(acc.device).to(torch.int64).reshape([1, -1] + [1] * (acc.dim() - 2))
    multiplier = x_scale * w_scale.to(x_scale.device) / y_scale.to(x_scale.device)
    if multiplier.dim() == 1 and multiplier.numel() > 1:     # per output channel
        multiplier = multiplier.reshape([1, -1] + [1] * (acc.dim() - 2))
    return _requantize(acc, multiplier, y_zero_point, x.dtype)
