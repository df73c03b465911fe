"""Importers for the shape family: Reshape, Transpose, Concat, Split, Squeeze, Unsqueeze, Expand, Shape,
Size, Tile, Pad.

Older versions carried shapes/axes/pads/split as attributes; they become int64 constant inputs here,
so the IR has one op per family with ONNX-latest semantics (ir/ops/shape.py).
"""

import torch

from ..registry import importer


def attr_input(ctx, node, name: str, dtype=torch.int64) -> str:
    """The node's attribute `name` as a constant input ('' when the node does not carry it)."""
    if name not in node.attrs:
        return ""
    return ctx.const(node.attrs[name], dtype, name=name)


def pad_inputs(inputs: list[str], count: int) -> list[str]:
    """Inputs padded with '' (absent) to `count` entries."""
    return (list(inputs) + [""] * count)[:max(count, len(inputs))]


@importer("Reshape", versions=(1,))
def import_reshape_1(ctx, node, inputs):
    if "shape" not in node.attrs:
        raise ValueError("Reshape-1 without a shape attribute")
    return [ctx.add1("Reshape", [inputs[0], attr_input(ctx, node, "shape")], {"allowzero": 0})]


@importer("Reshape", versions=(5, 13, 14, 19, 21, 23, 24, 25))
def import_reshape(ctx, node, inputs):
    return [ctx.add1("Reshape", inputs[:2], {"allowzero": int(node.attrs.get("allowzero", 0))})]


@importer("Transpose", versions=(1, 13, 21, 23, 24, 25))
def import_transpose(ctx, node, inputs):
    perm = node.attrs.get("perm")
    return [ctx.add1("Transpose", inputs, {"perm": list(perm) if perm is not None else None})]


@importer("Concat", versions=(1, 4, 11, 13))
def import_concat(ctx, node, inputs):
    axis = node.attrs.get("axis", 1)           # only Concat-1 may omit it; its default was 1
    return [ctx.add1("Concat", [i for i in inputs if i], {"axis": int(axis)})]


@importer("Split", versions=(2, 11, 13, 18))
def import_split(ctx, node, inputs):
    """split sizes: attribute (< 13) or input (≥ 13); without them, equal parts, one per output."""
    if node.version < 13:
        split = attr_input(ctx, node, "split")
    else:
        split = inputs[1] if len(inputs) > 1 else ""
    attrs = {"axis": int(node.attrs.get("axis", 0)), "num_outputs": 0}
    if not split:
        attrs["num_outputs"] = int(node.attrs.get("num_outputs", len(node.outputs)))
        if attrs["num_outputs"] != len(node.outputs):
            raise ValueError(f"num_outputs={attrs['num_outputs']} but the node has {len(node.outputs)} outputs")
    return ctx.add("Split", [inputs[0], split], attrs, num_outputs=len(node.outputs))


@importer("Squeeze", versions=(1, 11, 13, 21, 23, 24, 25))
def import_squeeze(ctx, node, inputs):
    axes = attr_input(ctx, node, "axes") if node.version < 13 else (inputs[1] if len(inputs) > 1 else "")
    return [ctx.add1("Squeeze", [inputs[0], axes] if axes else [inputs[0]])]


@importer("Unsqueeze", versions=(1, 11, 13, 21, 23, 24, 25))
def import_unsqueeze(ctx, node, inputs):
    axes = attr_input(ctx, node, "axes") if node.version < 13 else inputs[1]
    if not axes:
        raise ValueError("Unsqueeze needs axes")
    return [ctx.add1("Unsqueeze", [inputs[0], axes])]


@importer("Expand", versions=(8, 13))
def import_expand(ctx, node, inputs):
    return [ctx.add1("Expand", inputs[:2])]


@importer("Shape", versions=(1, 13, 15, 19, 21, 23, 24, 25))
def import_shape(ctx, node, inputs):
    attrs = {"start": int(node.attrs.get("start", 0)), "end": node.attrs.get("end")}
    return [ctx.add1("Shape", inputs, attrs)]


@importer("Size", versions=(1, 13, 19, 21, 23, 24, 25))
def import_size(ctx, node, inputs):
    return [ctx.add1("Size", inputs)]


@importer("Tile", versions=(6, 13))
def import_tile(ctx, node, inputs):
    return [ctx.add1("Tile", inputs[:2])]


@importer("Pad", versions=(2,))
def import_pad_2(ctx, node, inputs):
    """Pad-2: pads and value are attributes; they become inputs."""
    value = ctx.const(float(node.attrs.get("value", 0.0)), torch.float32, name="value")
    return [ctx.add1("Pad", [inputs[0], attr_input(ctx, node, "pads"), value],
                     {"mode": node.attrs.get("mode", "constant")})]


@importer("Pad", versions=(11, 13, 18, 19, 21, 23, 24, 25))
def import_pad(ctx, node, inputs):
    """Pad-11+: (data, pads, constant_value?, axes? (≥ 18)); mode 'wrap' since 19."""
    mode = node.attrs.get("mode", "constant")
    if mode == "wrap" and node.version < 19:
        raise ValueError("Pad mode 'wrap' needs opset 19 or later")
    args = pad_inputs(inputs, 4)
    while args and not args[-1]:
        args.pop()
    return [ctx.add1("Pad", args, {"mode": mode})]
