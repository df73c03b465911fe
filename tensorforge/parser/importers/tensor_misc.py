"""Importers for tensor generators, scans and cache updates: ConstantOfShape, Range, EyeLike, OneHot, Trilu,
CumSum, TensorScatter.

All map 1:1 onto the IR op of the same name (ir/ops/tensor_misc.py). EyeLike's ONNX element-type code
becomes an IR dtype name. OneHot-9's text gives all-off rows for negative indices, but onnxruntime (the
users' reference) counts them from depth in every version, as OneHot-11 specifies; we do the same.
"""

from ...ir import dtype_name
from ..registry import importer
from ..tensors import torch_dtype


@importer("ConstantOfShape", versions=(9, 20, 21, 23, 24, 25))
def import_constant_of_shape(ctx, node, inputs):
    value = node.attrs.get("value")
    return [ctx.add1("ConstantOfShape", inputs, {"value": value.reshape(-1)[:1].clone() if value is not None else None})]


@importer("Range", versions=(11, 27))
def import_range(ctx, node, inputs):
    return [ctx.add1("Range", inputs, {"stash_type": int(node.attrs.get("stash_type", 1))})]


@importer("EyeLike", versions=(9, 22))
def import_eye_like(ctx, node, inputs):
    dt = node.attrs.get("dtype")
    return [ctx.add1("EyeLike", inputs, {"dtype": dtype_name(torch_dtype(dt, f"{node.where()}: ")) if dt else None,
                                         "k": int(node.attrs.get("k", 0))})]


@importer("OneHot", versions=(9, 11, 28))
def import_one_hot(ctx, node, inputs):
    return [ctx.add1("OneHot", inputs, {"axis": int(node.attrs.get("axis", -1))})]


@importer("Trilu", versions=(14,))
def import_trilu(ctx, node, inputs):
    args = list(inputs) if len(inputs) > 1 and inputs[1] else inputs[:1]
    return [ctx.add1("Trilu", args, {"upper": int(node.attrs.get("upper", 1))})]


@importer("CumSum", versions=(11, 14))
def import_cumsum(ctx, node, inputs):
    return [ctx.add1("CumSum", inputs, {"exclusive": int(node.attrs.get("exclusive", 0)),
                                        "reverse": int(node.attrs.get("reverse", 0))})]


@importer("TensorScatter", versions=(24,))
def import_tensor_scatter(ctx, node, inputs):
    args = inputs[:3] if len(inputs) > 2 and inputs[2] else inputs[:2]     # write_indices is optional
    return [ctx.add1("TensorScatter", args, {"mode": node.attrs.get("mode", "linear"),
                                             "axis": int(node.attrs.get("axis", -2))})]
