"""Bitwise ops on integer tensors: BitShift, BitwiseAnd/Or/Xor/Not, and BitCast (reinterpret bits).

Elementwise with numpy broadcasting: one read of each input element, one write of each output element.
torch lacks arithmetic kernels for uint16/32/64 on CPU, so shifts run on an int64 copy and wrap back to
the input type (exact: every value of an 8–32-bit type fits, and uint64 is handled on its bit pattern).
"""

import torch

from ..dtypes import dtype_from_name
from ..opspec import REQUIRED, op

_UNSIGNED = {torch.uint8: 8, torch.uint16: 16, torch.uint32: 32, torch.uint64: 64}
_SIGNED = {torch.int8: 8, torch.int16: 16, torch.int32: 32, torch.int64: 64}


def _wide(x: torch.Tensor) -> torch.Tensor:
    """The values as int64 (uint64: the same 64 bits)."""
    return x.view(torch.int64) if x.dtype == torch.uint64 else x.to(torch.int64)


def _narrow(v: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """int64 → dtype keeping the low bits (two's-complement wrap-around)."""
    return v.view(torch.uint64) if dtype == torch.uint64 else v.to(dtype)


@op("BitShift", attrs={"direction": REQUIRED})
def bit_shift(x, y, direction):
    """z = x << y or x >> y (arithmetic for signed types). A shift amount < 0 or ≥ the bit width gives
    the sign fill alone: -1 for a right shift of a negative value, else 0 (ONNX BitShift-28)."""
    dtype = x.dtype
    width = _UNSIGNED.get(dtype) or _SIGNED.get(dtype)
    if width is None:
        raise TypeError(f"BitShift needs an integer tensor, got {dtype}")
    v, s = torch.broadcast_tensors(_wide(x), _wide(y).to(x.device))
    valid = (s >= 0) & (s < width)
    s = torch.where(valid, s, torch.zeros_like(s))
    if direction == "LEFT":
        out = torch.where(valid, v << s, torch.zeros_like(v))
    elif direction == "RIGHT":
        if dtype == torch.uint64:   # logical shift of the bit pattern held in an int64
            s1 = torch.clamp(s, min=1)
            shifted = torch.where(s == 0, v, (v >> s1) & ((torch.ones_like(v) << (64 - s1)) - 1))
        else:
            shifted = v >> s
        fill = torch.where(v < 0, -torch.ones_like(v), torch.zeros_like(v)) if dtype in _SIGNED else torch.zeros_like(v)
        out = torch.where(valid, shifted, fill)
    else:
        raise ValueError(f"BitShift direction must be LEFT or RIGHT, got {direction!r}")
    return _narrow(out, dtype)


_AS_SIGNED = {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}


def _bits(fn, *xs):
    """Apply `fn` on the bit patterns: uint16/32/64 (no torch CPU kernels) run as same-width signed."""
    dtype = xs[0].dtype
    carrier = _AS_SIGNED.get(dtype)
    xs = [x.to(xs[0].device) for x in xs]
    if carrier is None:
        return fn(*xs)
    return fn(*(x.view(carrier) for x in xs)).view(dtype)


@op("BitwiseAnd")
def bitwise_and(a, b): return _bits(torch.bitwise_and, a, b)


@op("BitwiseOr")
def bitwise_or(a, b): return _bits(torch.bitwise_or, a, b)


@op("BitwiseXor")
def bitwise_xor(a, b): return _bits(torch.bitwise_xor, a, b)


@op("BitwiseNot")
def bitwise_not(x): return _bits(torch.bitwise_not, x)


@op("BitCast", attrs={"to": REQUIRED})
def bit_cast(x, to):
    """Reinterpret the bytes of x as dtype `to` (same bit width; no value conversion). Zero traffic
    beyond one copy: a view when the layout allows."""
    dtype = dtype_from_name(to)
    if x.element_size() != torch.empty((), dtype=dtype).element_size():
        raise ValueError(f"BitCast from {x.dtype} to {dtype}: bit widths differ")
    return x.contiguous().view(dtype)
