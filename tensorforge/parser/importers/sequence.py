"""Importers for sequence and optional ops (1:1 onto the IR ops of ir/ops/sequence.py).

Element types given as ONNX attributes (SequenceEmpty `dtype`, Optional `type`) become IR dtype names.
SplitToSequence-24, Optional-28 and OptionalHas/GetElement-18/28 only widen type lists over their
previous versions; all map to the same IR ops.
"""

import onnx

from ...ir import dtype_name
from ..registry import importer
from ..tensors import torch_dtype


def _plain(ir_op, attr_names=()):
    def fn(ctx, node, inputs):
        return [ctx.add1(ir_op, inputs, {k: node.attrs[k] for k in attr_names if k in node.attrs})]
    return fn


for _op, _versions, _attrs in [
        ("SequenceConstruct", (11,), ()), ("SequenceInsert", (11,), ()), ("SequenceErase", (11,), ()),
        ("SequenceAt", (11,), ()), ("SequenceLength", (11,), ()), ("SplitToSequence", (11, 24), ("axis", "keepdims")),
        ("ConcatFromSequence", (11,), ("axis", "new_axis")), ("OptionalHasElement", (15, 18, 28), ()),
        ("OptionalGetElement", (15, 18, 28), ())]:
    importer(_op, versions=_versions)(_plain(_op, _attrs))


@importer("SequenceEmpty", versions=(11,))
def import_sequence_empty(ctx, node, inputs):
    elem = node.attrs.get("dtype", onnx.TensorProto.FLOAT)
    return [ctx.add1("SequenceEmpty", [], {"dtype": dtype_name(torch_dtype(elem, f"{node.where()}: "))})]


def _elem_of(type_proto: onnx.TypeProto) -> tuple[int, bool]:
    """(tensor element type, is a sequence) of optional(tensor) / optional(seq(tensor))."""
    kind = type_proto.WhichOneof("value")
    if kind == "optional_type":
        return _elem_of(type_proto.optional_type.elem_type)
    if kind == "sequence_type":
        return _elem_of(type_proto.sequence_type.elem_type)[0], True
    return type_proto.tensor_type.elem_type, False


@importer("Optional", versions=(15, 28))
def import_optional(ctx, node, inputs):
    attrs = {}
    if "type" in node.attrs:
        elem, is_seq = _elem_of(node.attrs["type"])
        attrs = {"dtype": dtype_name(torch_dtype(elem, f"{node.where()}: ")), "of_sequence": int(is_seq)}
    return [ctx.add1("Optional", inputs[:1], attrs)]
