"""Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare, ArgMax, ArgMin.

Every Reduce op takes (data, axes?) with ONNX-latest semantics: `axes` is a value input; absent or empty
axes reduce everything, unless noop_with_empty_axes=1, which reduces nothing. keepdims keeps the
reduced axes as size 1. Each reads data once and writes the (smaller) output once.
"""

import torch

from ..opspec import op
from .shape import host_ints, norm_axis

_ATTRS = {"keepdims": 1, "noop_with_empty_axes": 0}


def _is_int(t: torch.Tensor) -> bool:
    return not (t.dtype.is_floating_point or t.dtype.is_complex)


def _dims(data, axes, noop) -> list[int]:
    """Sorted reduced axes. Empty axes reduce everything, or nothing with noop_with_empty_axes=1 — then only
    the elementwise part runs (ReduceSumSquare acts as Square, ReduceL1 as Abs, as ONNX specifies)."""
    ax = host_ints(axes, "Reduce axes") if axes is not None else []
    if not ax:
        return [] if noop else list(range(data.dim()))
    return sorted({norm_axis(a, data.dim(), "Reduce axis") for a in ax})


def _reduce_op(name: str, fn):
    """Register IR op `name`: fn(data, dims, keepdims) with dims a sorted list ([] = reduce nothing)."""
    def reference(data, axes=None, keepdims=1, noop_with_empty_axes=0):
        return fn(data, _dims(data, axes, noop_with_empty_axes), bool(keepdims))
    reference.__name__ = name
    reference.__doc__ = fn.__doc__
    op(name, attrs=dict(_ATTRS), value_inputs=(1,))(reference)


def _sum(x, dims, keep):
    """Σ x over dims, in x's dtype."""
    return torch.sum(x, dims, keepdim=keep, dtype=x.dtype) if dims else x.clone()


def _mean(x, dims, keep):
    """Σ x / count; integer inputs divide with truncation (as onnxruntime does)."""
    if not dims:
        return x.clone()
    if _is_int(x):
        count = 1
        for d in dims:
            count *= x.shape[d]
        return torch.div(torch.sum(x, dims, keepdim=keep, dtype=torch.int64), count, rounding_mode="trunc").to(x.dtype)
    return torch.mean(x, dims, keepdim=keep)


def _extreme(largest: bool):
    def fn(x, dims, keep):
        """max (or min) over dims; an empty reduction gives −inf (+inf), or the dtype's lowest (highest) value."""
        if not dims:
            return x.clone()
        if any(x.shape[d] == 0 for d in dims):
            shape = [1 if i in dims else s for i, s in enumerate(x.shape)] if keep else \
                [s for i, s in enumerate(x.shape) if i not in dims]
            if x.dtype == torch.bool:
                fill = not largest
            elif x.dtype.is_floating_point:
                fill = -float("inf") if largest else float("inf")
            else:
                fill = torch.iinfo(x.dtype).min if largest else torch.iinfo(x.dtype).max
            return torch.full(shape, fill, dtype=x.dtype, device=x.device)
        return torch.amax(x, dims, keepdim=keep) if largest else torch.amin(x, dims, keepdim=keep)
    return fn


def _prod(x, dims, keep):
    """Π x over dims (one axis at a time, last first so the indices stay valid)."""
    out = x
    for d in reversed(dims):
        out = torch.prod(out, d, keepdim=keep, dtype=x.dtype)
    return out if dims else x.clone()


def _in_float(fn):
    """Integer inputs are reduced in float64 and cast back (truncating), as onnxruntime does."""
    def wrapped(x, dims, keep):
        if _is_int(x):
            return fn(x.to(torch.float64), dims, keep).to(x.dtype)
        return fn(x, dims, keep)
    wrapped.__doc__ = fn.__doc__
    return wrapped


def _l1(x, dims, keep):
    """Σ |x|."""
    return _sum(torch.abs(x), dims, keep)


def _l2(x, dims, keep):
    """√(Σ x²)."""
    return torch.sqrt(_sum(x * x, dims, keep))


def _log_sum(x, dims, keep):
    """log(Σ x)."""
    return torch.log(_sum(x, dims, keep))


def _log_sum_exp(x, dims, keep):
    """log(Σ exp(x)), computed stably as m + log(Σ exp(x − m)) with m the max."""
    return torch.logsumexp(x, dims, keepdim=keep) if dims else x.clone()


def _sum_square(x, dims, keep):
    """Σ x²."""
    return _sum(x * x, dims, keep)


for _name, _fn in {"ReduceSum": _sum, "ReduceMean": _mean, "ReduceMax": _extreme(True),
                   "ReduceMin": _extreme(False), "ReduceProd": _prod, "ReduceL1": _l1, "ReduceL2": _in_float(_l2),
                   "ReduceLogSum": _in_float(_log_sum), "ReduceLogSumExp": _in_float(_log_sum_exp),
                   "ReduceSumSquare": _sum_square}.items():
    _reduce_op(_name, _fn)


def _arg(x, axis, keepdims, select_last_index, largest: bool):
    axis = norm_axis(axis, x.dim())
    fn = torch.argmax if largest else torch.argmin
    if select_last_index:
        n = x.shape[axis]
        return (n - 1) - fn(x.flip(axis), axis, keepdim=bool(keepdims))
    return fn(x, axis, keepdim=bool(keepdims))


@op("ArgMax", attrs={"axis": 0, "keepdims": 1, "select_last_index": 0})
def arg_max(x, axis, keepdims, select_last_index):
    """int64 index of the largest entry along `axis` (first one, or last with select_last_index)."""
    return _arg(x, axis, keepdims, select_last_index, True)


@op("ArgMin", attrs={"axis": 0, "keepdims": 1, "select_last_index": 0})
def arg_min(x, axis, keepdims, select_last_index):
    """int64 index of the smallest entry along `axis` (first one, or last with select_last_index)."""
    return _arg(x, axis, keepdims, select_last_index, False)
