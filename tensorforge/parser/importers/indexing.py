"""Importers for the indexing family: Gather*, Scatter*, Slice, Compress, ReverseSequence, TopK, NonZero.

Old forms are normalised: Slice-1's starts/ends/axes and TopK-1's k attributes become int64 constant
inputs; the deprecated Scatter is ScatterElements; versions without `reduction`/`batch_dims` get the default.
"""

import torch

from ..registry import importer
from .shape import attr_input


@importer("Gather", versions=(1, 11, 13))
def import_gather(ctx, node, inputs):
    return [ctx.add1("Gather", inputs, {"axis": int(node.attrs.get("axis", 0))})]


@importer("GatherElements", versions=(11, 13))
def import_gather_elements(ctx, node, inputs):
    return [ctx.add1("GatherElements", inputs, {"axis": int(node.attrs.get("axis", 0))})]


@importer("GatherND", versions=(11, 12, 13))
def import_gather_nd(ctx, node, inputs):
    return [ctx.add1("GatherND", inputs, {"batch_dims": int(node.attrs.get("batch_dims", 0))})]


@importer("ScatterND", versions=(11, 13, 16, 18))
def import_scatter_nd(ctx, node, inputs):
    return [ctx.add1("ScatterND", inputs, {"reduction": node.attrs.get("reduction", "none")})]


@importer("ScatterElements", versions=(11, 13, 16, 18))
def import_scatter_elements(ctx, node, inputs):
    return [ctx.add1("ScatterElements", inputs, {"axis": int(node.attrs.get("axis", 0)),
                                                 "reduction": node.attrs.get("reduction", "none")})]


@importer("Scatter", versions=(9, 11))
def import_scatter(ctx, node, inputs):
    """Scatter (deprecated in opset 11) is ScatterElements without reduction."""
    return [ctx.add1("ScatterElements", inputs, {"axis": int(node.attrs.get("axis", 0)), "reduction": "none"})]


@importer("Slice", versions=(1,))
def import_slice_1(ctx, node, inputs):
    """Slice-1: starts/ends/axes attributes (step 1) become inputs."""
    args = [inputs[0], attr_input(ctx, node, "starts"), attr_input(ctx, node, "ends")]
    if "axes" in node.attrs:
        args.append(attr_input(ctx, node, "axes"))
    return [ctx.add1("Slice", args)]


@importer("Slice", versions=(10, 11, 13))
def import_slice(ctx, node, inputs):
    args = list(inputs)
    while args and not args[-1]:
        args.pop()
    return [ctx.add1("Slice", args)]


@importer("Compress", versions=(9, 11, 28))
def import_compress(ctx, node, inputs):
    axis = node.attrs.get("axis")
    return [ctx.add1("Compress", inputs, {"axis": int(axis) if axis is not None else None})]


@importer("ReverseSequence", versions=(10, 28))
def import_reverse_sequence(ctx, node, inputs):
    return [ctx.add1("ReverseSequence", inputs, {"batch_axis": int(node.attrs.get("batch_axis", 1)),
                                                 "time_axis": int(node.attrs.get("time_axis", 0))})]


@importer("TopK", versions=(1, 10, 11, 24))
def import_topk(ctx, node, inputs):
    """TopK-1: k attribute; TopK-10: k input; TopK-11+: largest/sorted attributes (default 1)."""
    k = ctx.const([int(node.attrs["k"])], torch.int64, name="k") if node.version < 10 else inputs[1]
    attrs = {"axis": int(node.attrs.get("axis", -1)), "largest": int(node.attrs.get("largest", 1)),
             "sorted": int(node.attrs.get("sorted", 1))}
    return ctx.add("TopK", [inputs[0], k], attrs, num_outputs=2)


@importer("NonZero", versions=(9, 13))
def import_nonzero(ctx, node, inputs):
    return [ctx.add1("NonZero", inputs)]
