"""Importers for Conv and ConvTranspose (versions 1, 11, 22: same semantics, wider types over time).

Attributes pass through unchanged (the IR ops use ONNX's names); `kernel_shape` is kept for display but the
IR takes the kernel size from the weight's shape. Unknown `auto_pad` values and spatial ranks outside 1–3
are refused here, naming the node.
"""

from ...util.errors import ModelError, UnsupportedOpError
from ..registry import importer

_AUTO_PAD = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
_CONV_T_ATTRS = _CONV_ATTRS + ("output_padding", "output_shape")


def _check(ctx, node, inputs):
    auto_pad = node.attrs.get("auto_pad", "NOTSET")
    if auto_pad not in _AUTO_PAD:
        raise ModelError(f"{node.where()}: auto_pad={auto_pad!r} is not one of {', '.join(_AUTO_PAD)}",
                         "re-export the model")
    w = ctx.info(inputs[1])
    if w is not None and w.shape is not None and not 3 <= len(w.shape) <= 5:
        raise UnsupportedOpError(f"{node.where()}: {len(w.shape) - 2}-D convolution is not supported",
                                 "1-D, 2-D and 3-D convolutions are; reshape the input to one of those")


@importer("Conv", versions=(1, 11, 22))
def import_conv(ctx, node, inputs):
    _check(ctx, node, inputs)
    attrs = {k: node.attrs[k] for k in _CONV_ATTRS if k in node.attrs}
    return [ctx.add1("Conv", inputs[:3], attrs)]


@importer("ConvTranspose", versions=(1, 11, 22))
def import_conv_transpose(ctx, node, inputs):
    _check(ctx, node, inputs)
    attrs = {k: node.attrs[k] for k in _CONV_T_ATTRS if k in node.attrs}
    return [ctx.add1("ConvTranspose", inputs[:3], attrs)]
