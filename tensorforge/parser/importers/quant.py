"""Importers for the quantization family (ir/ops/quant.py).

QuantizeLinear/DequantizeLinear: every since_version from 10 to 28 maps to one IR op — later versions
add attributes (axis 13, saturate 19, block_size/output_dtype 21, precision 25) and element types whose
defaults reproduce the earlier behaviour (per-tensor scalars need no axis). ONNX element-type attributes
(output_dtype, precision) become IR dtype names; 0 means "not given".
"""

from ...ir import dtype_name
from ..registry import importer
from ..tensors import torch_dtype

_Q_VERSIONS = (10, 13, 19, 21, 23, 24, 25, 28)
_CONV = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


def _dtype_attr(node, key):
    v = node.attrs.get(key, 0)
    return dtype_name(torch_dtype(v, f"{node.where()}: ")) if v else None


@importer("QuantizeLinear", versions=_Q_VERSIONS)
def import_quantize_linear(ctx, node, inputs):
    attrs = {k: node.attrs[k] for k in ("axis", "block_size", "saturate") if k in node.attrs}
    attrs.update(output_dtype=_dtype_attr(node, "output_dtype"), precision=_dtype_attr(node, "precision"))
    return [ctx.add1("QuantizeLinear", inputs, attrs)]


@importer("DequantizeLinear", versions=_Q_VERSIONS)
def import_dequantize_linear(ctx, node, inputs):
    attrs = {k: node.attrs[k] for k in ("axis", "block_size") if k in node.attrs}
    attrs["output_dtype"] = _dtype_attr(node, "output_dtype")
    return [ctx.add1("DequantizeLinear", inputs, attrs)]


@importer("DynamicQuantizeLinear", versions=(11,))
def import_dynamic_quantize_linear(ctx, node, inputs):
    return ctx.add("DynamicQuantizeLinear", inputs, num_outputs=3)


def _plain(ir_op, attr_names=()):
    def fn(ctx, node, inputs):
        return [ctx.add1(ir_op, inputs, {k: node.attrs[k] for k in attr_names if k in node.attrs})]
    return fn


importer("MatMulInteger", versions=(10,))(_plain("MatMulInteger"))
importer("QLinearMatMul", versions=(10, 21))(_plain("QLinearMatMul"))
importer("ConvInteger", versions=(10,))(_plain("ConvInteger", _CONV))
importer("QLinearConv", versions=(10,))(_plain("QLinearConv", _CONV))
