"""Decode ONNX node attributes to Python values, filling defaults from the ONNX schema.

INT/FLOAT/STRING and their lists → int/float/str lists; TENSOR → torch.Tensor; GRAPH → the GraphProto
(control-flow importers parse it as a sub-network). Defaults are read from `onnx.defs` schemas, never typed by hand.
`check_attributes(op_type, attrs, where)` refuses values no op can run with (dilations 0, strides of 2^62,
negative pads of a convolution …) as one ModelError naming the node, before any layer is built.
"""

import onnx
from onnx import helper

from ..util.errors import ModelError
from .tensors import to_torch

MAX_DIM = 2**31 - 1
# sliding-window ops: their kernel_shape/strides/dilations are ≥ 1, pads/output_padding ≥ 0, group ≥ 1
_WINDOWED = {"Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "DeformConv", "MaxPool", "AveragePool",
             "LpPool", "MaxUnpool", "Col2Im", "MaxRoiPool", "GlobalLpPool"}
_POSITIVE = ("kernel_shape", "strides", "dilations", "group", "block_size", "blocksize")
_NON_NEGATIVE = ("pads", "output_padding", "output_shape")


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


def _ints(value) -> list:
    vals = value if isinstance(value, list) else [value]
    return [v for v in vals if isinstance(v, int) and not isinstance(v, bool)]


def check_attributes(op_type: str, attrs: dict, where: str) -> None:
    """Bounds that hold for every version of the op: one ModelError naming the node and the attribute."""
    for name, value in attrs.items():
        for v in _ints(value):
            if abs(v) > 2**62:
                raise ModelError(f"{where}: attribute {name} = {v} is out of range", "re-export the model")
    if op_type in _WINDOWED or op_type in ("DepthToSpace", "SpaceToDepth"):
        for name in _POSITIVE:
            if name in attrs:
                bad = [v for v in _ints(attrs[name]) if not 1 <= v <= MAX_DIM]
                if bad:
                    raise ModelError(f"{where}: attribute {name} = {attrs[name]} must be positive (and below 2^31)",
                                     f"fix {name} in the exporter; ONNX requires every entry ≥ 1")
    if op_type in _WINDOWED:
        for name in _NON_NEGATIVE:
            if name in attrs:
                bad = [v for v in _ints(attrs[name]) if not 0 <= v <= MAX_DIM]
                if bad:
                    raise ModelError(f"{where}: attribute {name} = {attrs[name]} must be ≥ 0 (and below 2^31)",
                                     f"fix {name} in the exporter")
