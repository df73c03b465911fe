"""Importers for the pooling ops: MaxPool, AveragePool, LpPool and GlobalAveragePool/GlobalMaxPool/GlobalLpPool.

Later versions only add attributes (count_include_pad in AveragePool-7, storage_order and the Indices output
in MaxPool-8, ceil_mode and dilations in 10/19, wider types in 12/22), whose schema defaults reproduce the
earlier behaviour, so every version maps to the same IR op with the attributes passed through. MaxPool
whose Indices output is used becomes `MaxPoolWithIndices`.
"""

from ...util.errors import ModelError
from ..registry import importer

_AUTO_PAD = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
_WINDOW = ("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides")


def _attrs(node, names):
    if node.attrs.get("auto_pad", "NOTSET") not in _AUTO_PAD:
        raise ModelError(f"{node.where()}: auto_pad={node.attrs['auto_pad']!r} is not one of {', '.join(_AUTO_PAD)}",
                         "re-export the model")
    if "kernel_shape" not in node.attrs:
        raise ModelError(f"{node.where()}: the kernel_shape attribute is required", "re-export the model")
    return {k: node.attrs[k] for k in names if k in node.attrs}


@importer("MaxPool", versions=(1, 8, 10, 11, 12, 22))
def import_max_pool(ctx, node, inputs):
    attrs = _attrs(node, _WINDOW + ("storage_order",))
    if len(node.outputs) > 1 and node.outputs[1]:
        return ctx.add("MaxPoolWithIndices", inputs[:1], attrs, num_outputs=2)
    return [ctx.add1("MaxPool", inputs[:1], attrs)]


@importer("AveragePool", versions=(1, 7, 10, 11, 19, 22))
def import_average_pool(ctx, node, inputs):
    return [ctx.add1("AveragePool", inputs[:1], _attrs(node, _WINDOW + ("count_include_pad",)))]


@importer("LpPool", versions=(2, 11, 18, 22))
def import_lp_pool(ctx, node, inputs):
    return [ctx.add1("LpPool", inputs[:1], _attrs(node, _WINDOW + ("p",)))]


@importer("GlobalAveragePool", versions=(1, 22))
def import_global_average_pool(ctx, node, inputs):
    return [ctx.add1("GlobalAveragePool", inputs[:1])]


@importer("GlobalMaxPool", versions=(1, 22))
def import_global_max_pool(ctx, node, inputs):
    return [ctx.add1("GlobalMaxPool", inputs[:1])]


@importer("GlobalLpPool", versions=(2, 22))
def import_global_lp_pool(ctx, node, inputs):
    return [ctx.add1("GlobalLpPool", inputs[:1], {"p": node.attrs.get("p", 2)})]
