"""Decode ONNX node attributes to Python values, filling defaults from the ONNX schema.

INT/FLOAT/STRING and their lists → int/float/str lists; TENSOR → torch.Tensor; GRAPH → the GraphProto
(control-flow importers parse it as a sub-network). Defaults are read from `onnx.defs` schemas, never typed by hand.
"""

import onnx
from onnx import helper

from .tensors import to_torch


def decode(attr: onnx.AttributeProto, base_dir: str | None = None):
    value = helper.get_attribute_value(attr)
    if attr.type == onnx.AttributeProto.TENSOR:
        return to_torch(value, base_dir)
    if attr.type == onnx.AttributeProto.TENSORS:
        return [to_torch(v, base_dir) for v in value]
    if attr.type == onnx.AttributeProto.STRING:
        return value.decode("utf-8", errors="replace")
    if attr.type == onnx.AttributeProto.STRINGS:
        return [v.decode("utf-8", errors="replace") for v in value]
    if attr.type in (onnx.AttributeProto.INTS, onnx.AttributeProto.FLOATS):
        return list(value)
    return value


def node_attributes(node: onnx.NodeProto, schema, base_dir: str | None = None) -> dict:
    """Attributes of `node`: explicit ones decoded, the rest from the schema's defaults (when it has one)."""
    attrs = {a.name: decode(a, base_dir) for a in node.attribute}
    if schema is not None:
        for name, spec in schema.attributes.items():
            if name not in attrs and spec.default_value.type != onnx.AttributeProto.UNDEFINED:
                attrs[name] = decode(spec.default_value, base_dir)
    return attrs
