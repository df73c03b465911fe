"""Tensor generators, scans and cache updates: ConstantOfShape, Range, EyeLike, OneHot, Trilu, CumSum,
TensorScatter.

Generators read only small value inputs and write their output once; a generator whose inputs are all
known at build time folds to a constant (static shapes) or runs on the host as shape arithmetic
(dynamic shapes). New tensors are created on the device of the input that carries the shape.
"""

import math

import torch

from ..dtypes import dtype_from_name
from ..opspec import op
from .shape import host_ints, host_scalar, norm_axis


@op("ConstantOfShape", attrs={"value": None}, value_inputs=(0,))
def constant_of_shape(shape, value):
    """A tensor of shape `shape` filled with value[0] (a one-element tensor; default float32 0)."""
    dims = host_ints(shape, "ConstantOfShape shape")
    if value is None:
        return torch.zeros(dims, dtype=torch.float32, device=shape.device)
    return torch.full(dims, value.reshape(-1)[0].item(), dtype=value.dtype, device=shape.device)


@op("Range", attrs={"stash_type": 1}, value_inputs=(0, 1, 2))
def range_(start, limit, delta, stash_type):
    """out[i] = start + i·delta for i < max(ceil((limit − start)/delta), 0), in start's dtype. Floats are
    computed in float64 and rounded once (at least as exact as either stash_type asks for fp16/bf16)."""
    s, e, d = (host_scalar(t, f"Range {n}") for t, n in ((start, "start"), (limit, "limit"), (delta, "delta")))
    if d == 0:
        raise ValueError("Range delta must not be 0")
    if start.dtype.is_floating_point:
        n = max(math.ceil((e - s) / d), 0)
        i = torch.arange(n, dtype=torch.float64, device=start.device)
        return (s + i * d).to(start.dtype)
    s, e, d = int(s), int(e), int(d)
    n = max(-((s - e) // d), 0)         # ceil((e - s) / d) in exact integer arithmetic
    return (s + torch.arange(n, dtype=torch.int64, device=start.device) * d).to(start.dtype)


@op("EyeLike", attrs={"dtype": None, "k": 0})
def eye_like(x, dtype, k):
    """A 2-D tensor shaped like x with ones on diagonal k (out[i, i+k] = 1), zeros elsewhere."""
    rows, cols = x.shape
    dt = dtype_from_name(dtype) if dtype is not None else x.dtype
    i = torch.arange(rows, device=x.device).unsqueeze(1)
    j = torch.arange(cols, device=x.device).unsqueeze(0)
    return (j - i == k).to(dt)


@op("OneHot", attrs={"axis": -1}, value_inputs=(1,))
def one_hot(indices, depth, values, axis):
    """out[…, j, …] = values[1] if j == indices[…] (negative indices + depth) else values[0]; the depth
    axis is inserted at `axis`. Out-of-range indices give an all-off row. Writes the output once."""
    n = int(host_scalar(depth, "OneHot depth"))
    axis = norm_axis(axis, indices.dim() + 1)
    idx = (indices.trunc() if indices.dtype.is_floating_point else indices).to(torch.int64)
    idx = torch.where(idx < 0, idx + n, idx).unsqueeze(-1)
    hot = torch.arange(n, device=indices.device) == idx
    vals = values.to(indices.device).reshape(-1)
    return torch.where(hot, vals[1], vals[0]).movedim(-1, axis)


@op("Trilu", attrs={"upper": 1}, value_inputs=(1,))
def trilu(x, k=None, upper=1):
    """Keep the upper (j − i ≥ k) or lower (j − i ≤ k) triangle of the last two axes; zero the rest."""
    if k is None or k.device.type == "meta":   # a k known only at run time does not change the (meta) shape
        kk = 0
    else:
        kk = int(host_scalar(k, "Trilu k"))
    return torch.triu(x, kk) if upper else torch.tril(x, kk)


@op("CumSum", attrs={"exclusive": 0, "reverse": 0}, value_inputs=(1,))
def cumsum(x, axis, exclusive, reverse):
    """out[i] = Σ_{j ≤ i} x[j] along `axis` (j < i when exclusive; from the end when reverse), in x's dtype."""
    a = norm_axis(int(host_scalar(axis, "CumSum axis")), x.dim())
    y = x.flip(a) if reverse else x
    out = torch.cumsum(y, a, dtype=x.dtype)
    if exclusive:
        out = torch.cat([torch.zeros_like(out.narrow(a, 0, 1)), out.narrow(a, 0, out.shape[a] - 1)], a) \
            if out.shape[a] else out
    return out.flip(a) if reverse else out


@op("TensorScatter", attrs={"mode": "linear", "axis": -2})
def tensor_scatter(past, update, write_indices=None, mode="linear", axis=-2):
    """KV-cache write: present = copy(past); present[b, …, w_b + s, …] = update[b, …, s, …] along `axis`
    (the position taken modulo the cache length in 'circular' mode); w = write_indices (default 0).
    Copies the cache once and writes the update once."""
    a = norm_axis(axis, past.dim())
    if a == 0:
        raise ValueError("TensorScatter axis must not be the batch axis 0")
    if mode not in ("linear", "circular"):
        raise ValueError(f"TensorScatter mode {mode!r} is not linear or circular")
    batch, steps, length = past.shape[0], update.shape[a], past.shape[a]
    start = torch.zeros(batch, dtype=torch.int64, device=past.device) if write_indices is None else \
        write_indices.to(device=past.device, dtype=torch.int64)
    pos = start.unsqueeze(1) + torch.arange(steps, device=past.device).unsqueeze(0)       # [batch, steps]
    if mode == "circular":
        pos = torch.remainder(pos, length)
    view = [batch] + [1] * (past.dim() - 1)
    view[a] = steps
    index = pos.reshape(view).expand(update.shape)
    return past.clone(memory_format=torch.contiguous_format).scatter_(a, index, update.to(past.device))
