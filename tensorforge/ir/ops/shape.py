"""Shape-family IR ops: Reshape, Transpose, Concat, Split, Squeeze, Unsqueeze, Expand, Shape, Size, Tile, Pad.

Inputs that carry a shape, axes or pads are "value inputs" (OpSpec.value_inputs): at build time they are
real host int64 tensors (from constants or Shape arithmetic), so references read them with `host_ints`;
at run time they may be CPU tensors while the data lives on CUDA. Reshape/Squeeze/Unsqueeze/Expand/Split
return views (no memory traffic); Transpose returns a strided view that the consumer reads once.
"""

import torch
import torch.nn.functional as F

from ..dynamic import ValueNeeded
from ..opspec import op


def host_ints(t: torch.Tensor | None, what: str) -> list[int] | None:
    """The integer values of a small value input (None stays None). A meta tensor's value is known only at
    run time (it was computed from tensor data): `ValueNeeded` lets the builder treat the output as dynamic."""
    if t is None:
        return None
    if t.device.type == "meta":
        raise ValueNeeded(f"{what} is computed from tensor data, so its value is unknown at build time")
    return [int(v) for v in t.reshape(-1).tolist()]


def host_scalar(t: torch.Tensor | None, what: str):
    """One Python number from a scalar value input (None stays None)."""
    if t is None:
        return None
    if t.device.type == "meta":
        raise ValueNeeded(f"{what} is computed from tensor data, so its value is unknown at build time")
    return t.reshape(-1)[0].item()


def norm_axis(axis: int, rank: int, what: str = "axis") -> int:
    """Map a possibly negative axis into [0, rank)."""
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


@op("Reshape", attrs={"allowzero": 0}, value_inputs=(1,))
def reshape(data, shape, allowzero):
    """Reshape to `shape`: -1 = inferred, 0 = copy the input dim (allowzero=0) or a real 0 (allowzero=1).
    A view when the input is contiguous: no traffic."""
    dims = host_ints(shape, "Reshape shape")
    if not allowzero:
        dims = [data.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return data.reshape(dims)


@op("Transpose", attrs={"perm": None})
def transpose(data, perm):
    """out[i_perm[0], …] = data[i_0, …]; perm defaults to reversing the axes. Returns a strided view."""
    return data.permute(list(perm) if perm is not None else list(range(data.dim() - 1, -1, -1)))


@op("Concat", attrs={"axis": 0})
def concat(*xs, axis):
    """Join along `axis`: reads every input once, writes the output once."""
    return torch.cat(xs, norm_axis(axis, xs[0].dim()))


@op("Split", attrs={"axis": 0, "num_outputs": 0}, value_inputs=(1,))
def split(x, split=None, axis=0, num_outputs=0):
    """Split along `axis` into pieces of lengths `split`, or into `num_outputs` pieces of ceil(n/num_outputs)
    (the last one smaller). Views: no traffic."""
    axis = norm_axis(axis, x.dim())
    sizes = host_ints(split, "Split split")
    if sizes is None:
        if num_outputs <= 0:
            raise ValueError("Split needs either the split input or num_outputs")
        n = x.shape[axis]
        chunk = -(-n // num_outputs)
        sizes = [min(chunk, max(n - i * chunk, 0)) for i in range(num_outputs)]
    if sum(sizes) != x.shape[axis]:
        raise ValueError(f"Split sizes {sizes} do not add up to dimension {x.shape[axis]}")
    return tuple(torch.split(x, sizes, axis))


@op("Squeeze", value_inputs=(1,))
def squeeze(data, axes=None):
    """Drop the listed size-1 axes (all size-1 axes when `axes` is absent). A view."""
    rank = data.dim()
    axes_ = host_ints(axes, "Squeeze axes")
    if axes_ is None:
        keep = [d for d in data.shape if d != 1]
    else:
        drop = {norm_axis(a, rank) for a in axes_}
        bad = [a for a in drop if data.shape[a] != 1]
        if bad:
            raise ValueError(f"Squeeze axis {bad[0]} has size {data.shape[bad[0]]}, not 1")
        keep = [d for i, d in enumerate(data.shape) if i not in drop]
    return data.reshape(keep)


@op("Unsqueeze", value_inputs=(1,))
def unsqueeze(data, axes):
    """Insert size-1 axes at the listed positions of the OUTPUT (rank + len(axes)). A view."""
    axes_ = host_ints(axes, "Unsqueeze axes")
    rank = data.dim() + len(axes_)
    ins = sorted(norm_axis(a, rank) for a in axes_)
    if len(set(ins)) != len(ins):
        raise ValueError(f"Unsqueeze axes {axes_} repeat an axis")
    dims = list(data.shape)
    for a in ins:
        dims.insert(a, 1)
    return data.reshape(dims)


@op("Expand", value_inputs=(1,))
def expand(data, shape):
    """Broadcast `data` against `shape` (numpy rules in both directions). A stride-0 view: no traffic."""
    out = torch.broadcast_shapes(tuple(data.shape), tuple(host_ints(shape, "Expand shape")))
    return data.expand(out)


def _shape_range(rank: int, start: int, end: int | None) -> tuple[int, int]:
    end = rank if end is None else end
    start, end = (start + rank if start < 0 else start), (end + rank if end < 0 else end)
    return min(max(start, 0), rank), min(max(end, 0), rank)


@op("Shape", attrs={"start": 0, "end": None}, metadata_only=True)
def shape_(data, start, end):
    """The dims data.shape[start:end] as an int64 HOST tensor (reads no data; clamped like Python slices)."""
    s, e = _shape_range(data.dim(), start, end)
    return torch.tensor(list(data.shape)[s:e], dtype=torch.int64)


@op("Size", metadata_only=True)
def size(data):
    """The element count as an int64 scalar HOST tensor (reads no data)."""
    return torch.tensor(data.numel(), dtype=torch.int64)


@op("Tile", value_inputs=(1,))
def tile(x, repeats):
    """out[i] = x[i mod x.shape]; out.shape = x.shape * repeats. Writes prod(repeats) copies of x."""
    reps = host_ints(repeats, "Tile repeats")
    if len(reps) != x.dim():
        raise ValueError(f"Tile repeats has {len(reps)} entries for a rank-{x.dim()} input")
    return x.repeat(reps)


def _pad_index(n: int, begin: int, end: int, mode: str, device) -> torch.Tensor:
    """Source index along one axis for output positions i = -begin … n+end-1."""
    i = torch.arange(-begin, n + end, device=device)
    if mode == "edge":
        return i.clamp(0, n - 1)
    if mode == "wrap":
        return torch.remainder(i, n)
    if n == 1:                                  # reflect with one element repeats it
        return torch.zeros_like(i)
    m = torch.remainder(i, 2 * n - 2)           # reflect (no edge repetition) has period 2(n-1)
    return torch.where(m < n, m, 2 * n - 2 - m)


@op("Pad", attrs={"mode": "constant"}, value_inputs=(1, 2, 3))
def pad(x, pads, constant_value=None, axes=None, mode="constant"):
    """Pad (or crop, for negative pads) the listed axes: pads = [b_0 … b_k, e_0 … e_k].
    constant: fill with constant_value; edge: repeat the border; reflect: mirror without the border;
    wrap: periodic. Reads x once, writes the output once."""
    rank = x.dim()
    p = host_ints(pads, "Pad pads")
    ax = [norm_axis(a, rank) for a in host_ints(axes, "Pad axes")] if axes is not None else list(range(rank))
    if len(p) != 2 * len(ax):
        raise ValueError(f"Pad pads has {len(p)} entries for {len(ax)} axes (need 2 per axis)")
    begin, end = dict(zip(ax, p[:len(ax)])), dict(zip(ax, p[len(ax):]))
    if mode == "constant":
        flat = []
        for a in range(rank - 1, -1, -1):       # torch orders (begin, end) pairs from the last axis
            flat += [begin.get(a, 0), end.get(a, 0)]
        value = host_scalar(constant_value, "Pad constant_value") if constant_value is not None else 0
        return F.pad(x, flat, mode="constant", value=value)
    if mode not in ("edge", "reflect", "wrap"):
        raise ValueError(f"Pad mode {mode!r} is not one of constant, reflect, edge, wrap")
    out = x
    for a in ax:
        if begin[a] or end[a]:
            if x.shape[a] == 0:
                raise ValueError(f"Pad mode {mode!r} cannot pad an empty axis {a}")
            out = out.index_select(a, _pad_index(x.shape[a], begin[a], end[a], mode, x.device))
    return out
