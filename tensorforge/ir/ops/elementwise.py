"""Elementwise and broadcasting ops: arithmetic, comparison, logic, unary math, Cast, Where.

Broadcasting is numpy's (= ONNX multidirectional = torch). Each op reads every input element once and
writes each output element once: traffic = Σ bytes(inputs) + bytes(output); fusion (passes/) merges chains
of these into one kernel so intermediate tensors never reach memory. torch has no CPU kernels for most
uint16/32/64 arithmetic and comparisons: those run on an int64 copy (`_wide`, uint64 on its bit pattern)
and wrap back; every other dtype takes the native torch op. Cast follows ONNX's conversion tables for the
float8, float8e8m0, float4e2m1 and 2/4-bit integer types (helpers in low_precision.py).
"""

import torch

from ..dtypes import dtype_from_name, dtype_name
from ..opspec import REQUIRED, op
from .low_precision import (E8M0, FLOAT4, FLOAT8, SUBBYTE_INT, as_int, float4_decode, float4_encode, to_float8,
                            to_float8e8m0, wrap_int)


def _int(t: torch.Tensor) -> bool:
    return not (t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool)


# ---- uint16/32/64 without torch kernels: compute on int64, wrap back ------------------------------------

_WIDE_UINT = (torch.uint16, torch.uint32, torch.uint64)
_I64_MIN = -(1 << 63)


def _uint(*xs) -> bool:
    return any(x.dtype in _WIDE_UINT for x in xs)


def _wide(x: torch.Tensor) -> torch.Tensor:
    """uint16/32 values as int64 (exact); uint64 as the same 64 bits in an int64 (+, −, × wrap alike)."""
    return x.view(torch.int64) if x.dtype == torch.uint64 else x.to(torch.int64)


def _narrow(v: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """int64 → dtype keeping the low bits (mod 2^width)."""
    return v.view(torch.uint64) if dtype == torch.uint64 else v.to(dtype)


def _key(x: torch.Tensor) -> torch.Tensor:
    """An int64 whose signed order is x's unsigned order (uint64: flip the top bit); `_unkey` inverts it."""
    return _wide(x) ^ _I64_MIN if x.dtype == torch.uint64 else _wide(x)


def _unkey(k: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return _narrow(k ^ _I64_MIN if dtype == torch.uint64 else k, dtype)


def _udivmod(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Unsigned 64-bit a // b and a % b on int64 carriers holding the bit patterns (uint16/32 need none of
    this: their int64 copies are non-negative). q0 = 2·((a >>> 1) // b) is exact signed arithmetic and
    a − q0·b ∈ [0, 2b), so one conditional subtract finishes; a divisor ≥ 2^63 (a negative carrier) gives
    q = (a ≥ b), r = a − q·b. About ten int64 passes: only uint64 Div/Mod pay it."""
    q0 = torch.div((a >> 1) & ~_I64_MIN, b, rounding_mode="trunc") << 1
    r0 = a - q0 * b
    fix = (r0 ^ _I64_MIN) >= (b ^ _I64_MIN)
    q, r = q0 + fix.to(torch.int64), torch.where(fix, r0 - b, r0)
    big = b < 0
    ge = (a ^ _I64_MIN) >= (b ^ _I64_MIN)
    q = torch.where(big, ge.to(torch.int64), q)
    r = torch.where(big, torch.where(ge, a - b, a), r)
    return q, r


def _uint_binary(a, b, fn):
    """fn on int64 carriers of two unsigned tensors of one dtype, wrapped back to it."""
    return _narrow(fn(_wide(a), _wide(b)), a.dtype)


@op("Add")
def add(a, b):
    return _uint_binary(a, b, torch.add) if _uint(a, b) else torch.add(a, b)


@op("Sub")
def sub(a, b):
    return _uint_binary(a, b, torch.sub) if _uint(a, b) else torch.sub(a, b)


@op("Mul")
def mul(a, b): return torch.mul(a, b)


@op("Div")
def div(a, b):
    """a / b; integer division truncates toward zero, as onnxruntime does."""
    if _uint(a, b):
        if a.dtype == torch.uint64:
            return _narrow(_udivmod(*torch.broadcast_tensors(_wide(a), _wide(b)))[0], a.dtype)
        return _uint_binary(a, b, lambda x, y: torch.div(x, y, rounding_mode="trunc"))
    if _int(a) and _int(b):
        return torch.div(a, b, rounding_mode="trunc")
    return torch.div(a, b)


@op("Mod", attrs={"fmod": 0})
def mod(a, b, fmod):
    """fmod=1: sign of the dividend (C fmod); fmod=0: sign of the divisor (Python %). Unsigned: both are a % b."""
    if _uint(a, b):
        if a.dtype == torch.uint64:
            return _narrow(_udivmod(*torch.broadcast_tensors(_wide(a), _wide(b)))[1], a.dtype)
        return _uint_binary(a, b, torch.remainder)
    return torch.fmod(a, b) if fmod else torch.remainder(a, b)


@op("Pow")
def pow_(a, b):
    """a ** b with the result in a's dtype (ONNX: output type = base type)."""
    return torch.pow(a, b).to(a.dtype)


def _fold(fn, xs):
    """fn folded over xs (n-ary Max/Min/Sum); unsigned wide types fold on order-preserving int64 keys."""
    if _uint(*xs):
        out = _key(xs[0])
        for x in xs[1:]:
            out = fn(out, _key(x))
        return _unkey(out, xs[0].dtype)
    out = xs[0]
    for x in xs[1:]:
        out = fn(out, x)
    return out


@op("Max")
def max_(*xs): return _fold(torch.maximum, xs)


@op("Min")
def min_(*xs): return _fold(torch.minimum, xs)


@op("Sum")
def sum_(*xs):
    if _uint(*xs):      # keys are the values shifted by 2^63 for uint64: add on the plain carriers instead
        out = _wide(xs[0])
        for x in xs[1:]:
            out = out + _wide(x)
        return _narrow(out, xs[0].dtype)
    return _fold(torch.add, xs)


@op("Mean")
def mean_(*xs):
    return sum_(*xs) / len(xs)


def _unary(name, fn):
    op(name)(fn)


def _abs(x): return x.clone() if _uint(x) else torch.abs(x)


def _sign(x): return (x != 0).to(x.dtype) if _uint(x) else torch.sign(x)


for _name, _fn in {
    "Neg": torch.neg, "Abs": _abs, "Sqrt": torch.sqrt, "Exp": torch.exp, "Log": torch.log,
    "Erf": torch.erf, "Reciprocal": torch.reciprocal, "Floor": torch.floor, "Ceil": torch.ceil,
    "Round": torch.round, "Sign": _sign, "Sin": torch.sin, "Cos": torch.cos, "Tan": torch.tan,
    "Asin": torch.asin, "Acos": torch.acos, "Atan": torch.atan, "Sinh": torch.sinh, "Cosh": torch.cosh,
    "Asinh": torch.asinh, "Acosh": torch.acosh, "Atanh": torch.atanh, "Not": torch.logical_not,
    "IsNaN": torch.isnan, "Identity": lambda x: x,
}.items():
    _unary(_name, _fn)


@op("IsInf", attrs={"detect_negative": 1, "detect_positive": 1})
def is_inf(x, detect_negative, detect_positive):
    pos = torch.isposinf(x) if detect_positive else torch.zeros_like(x, dtype=torch.bool)
    neg = torch.isneginf(x) if detect_negative else torch.zeros_like(x, dtype=torch.bool)
    return pos | neg


@op("Equal")
def equal(a, b): return torch.eq(a, b)


def _compare(fn, a, b):
    return fn(_key(a), _key(b)) if _uint(a, b) else fn(a, b)


@op("Less")
def less(a, b): return _compare(torch.lt, a, b)


@op("LessOrEqual")
def less_equal(a, b): return _compare(torch.le, a, b)


@op("Greater")
def greater(a, b): return _compare(torch.gt, a, b)


@op("GreaterOrEqual")
def greater_equal(a, b): return _compare(torch.ge, a, b)


@op("And")
def and_(a, b): return torch.logical_and(a, b)


@op("Or")
def or_(a, b): return torch.logical_or(a, b)


@op("Xor")
def xor_(a, b): return torch.logical_xor(a, b)


@op("Where")
def where(cond, a, b): return torch.where(cond, a, b)


_CAST_SRC = (FLOAT4, *SUBBYTE_INT)                    # no torch copy kernels: decode first
_CAST_DST = (FLOAT4, E8M0, *FLOAT8, *SUBBYTE_INT)     # ONNX rules differ from torch's conversion (or none)


def _to_float4(x: torch.Tensor) -> torch.Tensor:
    """ONNX FLOAT4E2M1: round to nearest even, saturate at ±6, ±0 keep their sign, NaN → +6
    (onnx technical/float4.md). float4_encode gives the magnitude code; the sign bit comes from x."""
    xf = x.float()
    mag = float4_encode(xf).view(torch.uint8) & 7
    neg = torch.signbit(xf) & ~torch.isnan(xf)
    return (mag | torch.where(neg, 8, 0).to(torch.uint8)).view(FLOAT4)


@op("Cast", attrs={"to": REQUIRED, "saturate": 1, "round_mode": "up"})
def cast(x, to, saturate=1, round_mode="up"):
    """Convert to dtype `to` (an IR dtype name such as 'float16'). Float → int truncates toward zero, except to
    the 2/4-bit types, where ONNX rounds half to even first; an integer out of the target's range wraps (two's
    complement: the low 2/4 bits are kept, so float → int4 of 8 is -8, of -9 is 7). float8 targets:
    saturate=1 clamps to ±max (±Inf too), saturate=0 gives NaN (Inf for e5m2) past the range; float8e8m0
    rounds by `round_mode` (up/down/nearest); float4e2m1 saturates at ±6. Dtypes torch converts natively
    take one `x.to` (one read, one write); the others decode/encode through float32 or int64."""
    dst = dtype_from_name(to)
    if dst not in _CAST_DST and x.dtype not in _CAST_SRC:
        return x.to(dst)
    if x.dtype == FLOAT4:
        x = float4_decode(x, torch.float32)
    elif x.dtype in SUBBYTE_INT:
        x = as_int(x)
    if dst in FLOAT8:
        return to_float8(x, dst, bool(saturate))
    if dst == E8M0:
        return to_float8e8m0(x, bool(saturate), round_mode)
    if dst == FLOAT4:
        return _to_float4(x)
    if dst in SUBBYTE_INT:
        if x.is_floating_point():       # onnx technical/int4.md, int2.md: round half to even, then keep the low bits
            x = torch.round(x.double())
        v = x.view(torch.int64) if x.dtype == torch.uint64 else x.to(torch.int64)
        return wrap_int(v, dst)
    return x.to(dst)


@op("CastLike", attrs={"saturate": 1, "round_mode": "up"})
def cast_like(x, like, saturate=1, round_mode="up"):
    """Convert x to the dtype of `like` with Cast's rules (used when the importer cannot see like's dtype yet)."""
    return cast(x, dtype_name(like.dtype), saturate, round_mode)


@op("Clip")
def clip(x, lo=None, hi=None):
    """min(max(x, lo), hi); absent bounds do not clamp."""
    if _uint(x):
        k = _key(x)
        if lo is not None:
            k = torch.maximum(k, _key(lo.to(x.device).to(x.dtype)))
        if hi is not None:
            k = torch.minimum(k, _key(hi.to(x.device).to(x.dtype)))
        return _unkey(k, x.dtype)
    if lo is not None:
        x = torch.maximum(x, lo.to(x.dtype))
    if hi is not None:
        x = torch.minimum(x, hi.to(x.dtype))
    return x
