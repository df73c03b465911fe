"""Indexing IR ops: Gather, GatherElements, GatherND, ScatterND, ScatterElements, Slice, Compress,
ReverseSequence, TopK, NonZero.

Indices follow ONNX: negative entries count from the end of their axis. Gathers read the selected
elements plus the indices and write the output once; scatters copy `data` once, then write `updates`.
Slice returns a view for positive steps. NonZero (and Compress with a run-time condition) have
data-dependent output lengths: see `nonzero` for how the builder treats them.
"""

import torch

from ..dynamic import data_dependent
from ..opspec import op
from .shape import host_ints, host_scalar, norm_axis


def _wrap(idx: torch.Tensor, n, device) -> torch.Tensor:
    """int64 indices on `device` with negatives mapped into [0, n)."""
    idx = idx.to(device=device, dtype=torch.int64)
    return torch.where(idx < 0, idx + n, idx)


@op("Gather", attrs={"axis": 0})
def gather(data, indices, axis):
    """out[a…, j…, b…] = data[a…, indices[j…], b…] along `axis`; out.shape = data[:axis] + indices + data[axis+1:]."""
    axis = norm_axis(axis, data.dim())
    idx = _wrap(indices, data.shape[axis], data.device)
    out = data.index_select(axis, idx.reshape(-1))
    return out.reshape(tuple(data.shape[:axis]) + tuple(indices.shape) + tuple(data.shape[axis + 1:]))


@op("GatherElements", attrs={"axis": 0})
def gather_elements(data, indices, axis):
    """out[i…] = data[i… with i_axis replaced by indices[i…]]; out.shape = indices.shape."""
    axis = norm_axis(axis, data.dim())
    return torch.gather(data, axis, _wrap(indices, data.shape[axis], data.device))


def _prod(dims) -> int:
    out = 1
    for d in dims:
        out *= d
    return out


def _linear(indices: torch.Tensor, dims: tuple[int, ...], device) -> torch.Tensor:
    """Row-major linear offset of each index tuple (last axis of `indices`) into a block of shape `dims`:
    Σ_j wrap(i_j)·stride_j, stride_j = Π dims[j+1:], with wrap(i) = i + dims[j] for i < 0. The sizes and strides
    are Python ints folded into each elementwise kernel — no tensor is made from host data, so no host→device
    copy: the op stays capturable in a CUDA graph. Reads the indices once per axis, writes the offsets."""
    idx = indices.to(device=device, dtype=torch.int64)
    lin = torch.zeros(idx.shape[:-1], dtype=torch.int64, device=device)       # k = 0: offset 0
    stride = 1
    for j in range(len(dims) - 1, -1, -1):
        col = idx[..., j]
        lin = lin + torch.where(col < 0, col + dims[j], col) * stride
        stride *= dims[j]
    return lin


@op("GatherND", attrs={"batch_dims": 0})
def gather_nd(data, indices, batch_dims):
    """Each row of `indices` (last axis, length k) addresses a slice data[b…, i_0 … i_{k-1}, :].
    out.shape = indices.shape[:-1] + data.shape[batch_dims + k:]."""
    b, k = batch_dims, indices.shape[-1]
    nb, block, rest = _prod(data.shape[:b]), tuple(data.shape[b:b + k]), tuple(data.shape[b + k:])
    flat = data.reshape((nb, _prod(block)) + rest)
    lin = _linear(indices, block, data.device).reshape(nb, -1)
    rows = torch.arange(nb, device=data.device).unsqueeze(1)
    return flat[rows, lin].reshape(tuple(indices.shape[:-1]) + rest)


_REDUCE = {"mul": "prod", "max": "amax", "min": "amin"}


@op("ScatterND", attrs={"reduction": "none"})
def scatter_nd(data, indices, updates, reduction):
    """out = copy(data); out[indices[j…]] (op)= updates[j…] with op ∈ {none, add, mul, max, min}."""
    k = indices.shape[-1]
    block, rest = tuple(data.shape[:k]), tuple(data.shape[k:])
    out = data.clone(memory_format=torch.contiguous_format)
    flat = out.view((_prod(block),) + rest)
    lin = _linear(indices, block, data.device).reshape(-1)
    upd = updates.to(data.device).reshape((-1,) + rest)
    if reduction == "none":
        flat[lin] = upd
    elif reduction == "add":
        flat.index_add_(0, lin, upd)
    elif reduction in _REDUCE:
        flat.index_reduce_(0, lin, upd, _REDUCE[reduction], include_self=True)
    else:
        raise ValueError(f"ScatterND reduction {reduction!r} is not one of none, add, mul, max, min")
    return out


@op("ScatterElements", attrs={"axis": 0, "reduction": "none"})
def scatter_elements(data, indices, updates, axis, reduction):
    """out = copy(data); out[i… with i_axis = indices[i…]] (op)= updates[i…]."""
    axis = norm_axis(axis, data.dim())
    idx = _wrap(indices, data.shape[axis], data.device)
    out = data.clone(memory_format=torch.contiguous_format)
    upd = updates.to(data.device)
    if reduction == "none":
        return out.scatter_(axis, idx, upd)
    if reduction == "add":
        return out.scatter_add_(axis, idx, upd)
    if reduction in _REDUCE:
        return out.scatter_reduce_(axis, idx, upd, _REDUCE[reduction], include_self=True)
    raise ValueError(f"ScatterElements reduction {reduction!r} is not one of none, add, mul, max, min")


def slice_bounds(n: int, start: int, end: int, step: int) -> tuple[int, int]:
    """ONNX Slice clamping for one axis of length n (negative start/end count from the end)."""
    if step == 0:
        raise ValueError("Slice step must not be 0")
    start, end = (start + n if start < 0 else start), (end + n if end < 0 else end)
    if step > 0:
        return min(max(start, 0), n), min(max(end, 0), n)
    return min(max(start, 0), n - 1), min(max(end, -1), n - 1)


@op("Slice", value_inputs=(1, 2, 3, 4))
def slice_(data, starts, ends, axes=None, steps=None):
    """out = data[s_0:e_0:t_0, …] on the listed axes, with ONNX clamping; negative steps walk backwards.
    A view for positive steps; a negative step copies the (reversed) selection once."""
    st, en = host_ints(starts, "Slice starts"), host_ints(ends, "Slice ends")
    ax = host_ints(axes, "Slice axes") if axes is not None else list(range(len(st)))
    sp = host_ints(steps, "Slice steps") if steps is not None else [1] * len(st)
    if not len(st) == len(en) == len(ax) == len(sp):
        raise ValueError(f"Slice starts/ends/axes/steps have different lengths ({len(st)}, {len(en)}, {len(ax)}, {len(sp)})")
    ax = [norm_axis(a, data.dim(), "Slice axis") for a in ax]
    if len(set(ax)) != len(ax):
        raise ValueError(f"Slice axes {ax} repeat an axis")
    out = data
    for a, s, e, t in zip(ax, st, en, sp):
        s, e = slice_bounds(data.shape[a], s, e, t)
        if t > 0:
            index = [slice(None)] * a + [slice(s, max(e, s), t)]
            out = out[tuple(index)]
        else:
            count = max(0, (s - e + (-t) - 1) // (-t))
            if count == 0:
                out = out.narrow(a, 0, 0)
            else:   # elements s, s+t, … : reverse the span [s - (count-1)·|t|, s] and take every |t|-th
                lo = s - (count - 1) * (-t)
                out = out.narrow(a, lo, s - lo + 1).flip(a)[(slice(None),) * a + (slice(None, None, -t),)]
    return out


def _compress_infer(x, condition, axis):
    """Exact when the condition is known at build time; otherwise a placeholder of the right rank whose
    selected axis (upper bound: its full length) stays dynamic."""
    if condition.device.type != "meta":
        return compress(x, condition, axis)
    return data_dependent(x.shape if axis is not None else (x.numel(),), x.dtype)


@op("Compress", attrs={"axis": None}, infer=_compress_infer)
def compress(x, condition, axis):
    """Keep the slices (along `axis`, or the elements of flattened x) whose condition entry is true; a
    condition shorter than the axis drops the rest. Output length = count(condition): exact at build time
    when the condition is a constant, otherwise known at run time (see NonZero)."""
    data = x.reshape(-1) if axis is None else x
    a = 0 if axis is None else norm_axis(axis, x.dim())
    cond = condition.reshape(-1).to(torch.bool)[:data.shape[a]]
    keep = torch.nonzero(cond).reshape(-1).to(data.device)
    return data.index_select(a, keep)


@op("ReverseSequence", attrs={"batch_axis": 1, "time_axis": 0})
def reverse_sequence(x, sequence_lens, batch_axis, time_axis):
    """For every batch entry b, reverse its first sequence_lens[b] steps along time_axis; the rest is copied.
    One gather: reads and writes every element once."""
    b, t = norm_axis(batch_axis, x.dim()), norm_axis(time_axis, x.dim())
    xt = x.movedim((b, t), (0, 1))
    steps = torch.arange(xt.shape[1], device=x.device).unsqueeze(0)
    lens = sequence_lens.to(device=x.device, dtype=torch.int64).unsqueeze(1)
    src = torch.where(steps < lens, lens - 1 - steps, steps)
    src = src.reshape(src.shape + (1,) * (xt.dim() - 2)).expand(xt.shape)
    return torch.gather(xt, 1, src).movedim((0, 1), (b, t))


@op("TopK", attrs={"axis": -1, "largest": 1, "sorted": 1}, value_inputs=(1,))
def topk(x, k, axis, largest, sorted):  # noqa: A002 - ONNX's attribute name
    """The k largest (or smallest) entries along `axis` and their int64 indices; equal values keep the lower
    index first (a stable sort, as onnxruntime orders them). Reads x once, writes 2·k slices."""
    kk = int(host_scalar(k, "TopK k"))
    axis = norm_axis(axis, x.dim())
    if not 0 <= kk <= x.shape[axis]:
        raise ValueError(f"TopK k={kk} is outside [0, {x.shape[axis]}] for axis {axis}")
    values, indices = torch.sort(x, dim=axis, descending=bool(largest), stable=True)
    return values.narrow(axis, 0, kk), indices.narrow(axis, 0, kk)


def _nonzero_infer(x):
    """Shape inference for NonZero: exact when x is known at build time (it is then evaluated, and folds);
    otherwise a placeholder [rank, numel] (the upper bound) whose count dimension stays dynamic (-1) and
    is produced by the run-time execution of the reference."""
    if x.device.type != "meta":
        return nonzero(x)
    return data_dependent((x.dim(), x.numel()), torch.int64)


@op("NonZero", infer=_nonzero_infer)
def nonzero(x):
    """Indices of the non-zero elements, shape [rank, count], in row-major order; count depends on the data.
    Reads x once, writes rank·count int64s."""
    return torch.nonzero(x).T.contiguous()
