"""Gather at constant positions → Slice (+ Squeeze): a view of the input instead of a copy.

Exporters write `x[i]`, `x.unbind(0)` and `qkv[0], qkv[1], qkv[2]` as Gather with a constant index; ViT's
attention does it three times per block on the (3, S, B, D) projection. Gather runs index_select: a kernel
that reads and writes the selection (B·S·D elements, ×3 per block) plus the index wrap-around kernels, while
the same rows are a strided view of the input: zero traffic, no launch.
"""

import torch

from ..pattern import Const, Op, Var
from .base import Rule


def _positions_reason(idx: torch.Tensor) -> str | None:
    if idx.dtype not in (torch.int64, torch.int32):
        return f"indices of dtype {idx.dtype}"
    if idx.dim() > 1:
        return f"indices of rank {idx.dim()} (a view needs a scalar or a 1-D run)"
    if idx.dim() == 1 and idx.numel() == 0:
        return "empty indices"
    return None


class GatherToSlice(Rule):
    """Gather(x, i, axis) with a constant scalar i           ⇒  Squeeze(Slice(x, [i], [i+1], [axis]), [axis])
    Gather(x, [i, i+1, …, i+n−1], axis) (a consecutive run)   ⇒  Slice(x, [i], [i+n], [axis])

    Negative positions count from the end (ONNX Gather); they are made non-negative with the axis length,
    which must be static and must contain every position (an out-of-range Gather stays, to fail as it should).
    """

    name = "Gather(x, const i) ⇒ Slice(x, i, i+1) view"
    anchor = "Gather"
    pattern = Op("Gather", Var("x"), Const(name="idx", scalar=False, pred=_positions_reason), name="gather")

    def check(self, m, g):
        values = g.values(m["x"])
        if values is not None and all(t.device.type != "meta" for t in values):
            return "the input is shape arithmetic known on the host (constant folding or the host handles it)"
        shape = g.shape(m["x"])
        if shape is None:
            return f"the input's shape is unknown ({g.shape_error})"
        axis = int(m["gather"].attrs.get("axis", 0))
        axis = axis + len(shape) if axis < 0 else axis
        if not 0 <= axis < len(shape):
            return f"axis {axis} is outside the input's rank {len(shape)}"
        n = shape[axis]
        if n < 0:
            return "the gathered axis has a dynamic length"
        idx = m["idx.value"].reshape(-1).to(torch.int64)
        pos = torch.where(idx < 0, idx + n, idx)
        if bool(((pos < 0) | (pos >= n)).any()):
            return f"an index is outside the axis length {n}"
        if pos.numel() > 1 and not bool((pos[1:] - pos[:-1] == 1).all()):
            return "the indices are not a consecutive ascending run"
        m.binds["axis"], m.binds["start"], m.binds["count"] = axis, int(pos[0]), int(pos.numel())
        return None

    def rewrite(self, m, g):
        net, gather = g.net, m["gather"]
        axis, start, count = m["axis"], m["start"], m["count"]

        def const(suffix, values):
            return net.add_constant(net.unique_name(f"{gather.name}/{suffix}"), torch.tensor(values, dtype=torch.int64))
        slice_in = [m["x"], const("starts", [start]), const("ends", [start + count]), const("axes", [axis])]
        if m["idx.value"].dim() == 1:
            return [self.new_layer(g, m, "Slice", slice_in, suffix="/slice")]
        rows = self.fresh_tensor(g, f"{gather.name}/rows")
        return [self.new_layer(g, m, "Slice", slice_in, [rows], suffix="/slice"),
                self.new_layer(g, m, "Squeeze", [rows, const("squeeze_axes", [axis])], suffix="/squeeze")]


RULES = [GatherToSlice()]
