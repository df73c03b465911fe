"""Elementwise and broadcasting ops: arithmetic, comparison, logic, unary math, Cast, Where.

Broadcasting is numpy's (= ONNX multidirectional = torch). Each op reads every input element once and
writes each output element once: traffic = Σ bytes(inputs) + bytes(output); fusion (passes/) merges chains
of these into one kernel so intermediate tensors never reach memory.
"""

import torch

from ..dtypes import dtype_from_name
from ..opspec import REQUIRED, op


def _int(t: torch.Tensor) -> bool:
    return not (t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool)


@op("Add")
def add(a, b): return torch.add(a, b)


@op("Sub")
def sub(a, b): return torch.sub(a, b)


@op("Mul")
def mul(a, b): return torch.mul(a, b)


@op("Div")
def div(a, b):
    """a / b; integer division truncates toward zero, as onnxruntime does."""
    if _int(a) and _int(b):
        return torch.div(a, b, rounding_mode="trunc")
    return torch.div(a, b)


@op("Mod", attrs={"fmod": 0})
def mod(a, b, fmod):
    """fmod=1: sign of the dividend (C fmod); fmod=0: sign of the divisor (Python %)."""
    return torch.fmod(a, b) if fmod else torch.remainder(a, b)


@op("Pow")
def pow_(a, b):
    """a ** b with the result in a's dtype (ONNX: output type = base type)."""
    return torch.pow(a, b).to(a.dtype)


@op("Max")
def max_(*xs):
    out = xs[0]
    for x in xs[1:]:
        out = torch.maximum(out, x)
    return out


@op("Min")
def min_(*xs):
    out = xs[0]
    for x in xs[1:]:
        out = torch.minimum(out, x)
    return out


@op("Sum")
def sum_(*xs):
    out = xs[0]
    for x in xs[1:]:
        out = out + x
    return out


@op("Mean")
def mean_(*xs):
    return sum_(*xs) / len(xs)


def _unary(name, fn):
    op(name)(fn)


for _name, _fn in {
    "Neg": torch.neg, "Abs": torch.abs, "Sqrt": torch.sqrt, "Exp": torch.exp, "Log": torch.log,
    "Erf": torch.erf, "Reciprocal": torch.reciprocal, "Floor": torch.floor, "Ceil": torch.ceil,
    "Round": torch.round, "Sign": torch.sign, "Sin": torch.sin, "Cos": torch.cos, "Tan": torch.tan,
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


@op("Less")
def less(a, b): return torch.lt(a, b)


@op("LessOrEqual")
def less_equal(a, b): return torch.le(a, b)


@op("Greater")
def greater(a, b): return torch.gt(a, b)


@op("GreaterOrEqual")
def greater_equal(a, b): return torch.ge(a, b)


@op("And")
def and_(a, b): return torch.logical_and(a, b)


@op("Or")
def or_(a, b): return torch.logical_or(a, b)


@op("Xor")
def xor_(a, b): return torch.logical_xor(a, b)


@op("Where")
def where(cond, a, b): return torch.where(cond, a, b)


@op("Cast", attrs={"to": REQUIRED})
def cast(x, to):
    """Convert to dtype `to` (an IR dtype name such as 'float16'). Float → int truncates toward zero."""
    return x.to(dtype_from_name(to))


@op("CastLike")
def cast_like(x, like):
    """Convert x to the dtype of `like` (used when the importer cannot see like's dtype yet)."""
    return x.to(like.dtype)


@op("Clip")
def clip(x, lo=None, hi=None):
    """min(max(x, lo), hi); absent bounds do not clamp."""
    if lo is not None:
        x = torch.maximum(x, lo.to(x.dtype))
    if hi is not None:
        x = torch.minimum(x, hi.to(x.dtype))
    return x
