"""Importer for onnxruntime's com.microsoft FusedConv (version 1): a Conv whose activation (and optional residual Z)
onnxruntime's graph optimizer folded in; files carry it when a session saved its optimized model.

    FusedConv(X, W, B?, Z?; activation, activation_params, <Conv attributes>)
        Y = act(Conv(X, W, B) + Z)           (Z: the residual of the fused Add, same shape as the conv output)
    activation / activation_params as onnxruntime's MLAS activation: Relu, Tanh, Sigmoid, LeakyRelu [alpha],
    Clip [min, max], HardSigmoid [alpha, beta]; an empty activation means none.
Imported as the ordinary ops (Conv → Add → activation), so the conv-epilogue fusion rules fuse them again as
for any exporter. An unknown activation or a wrong number of activation_params is refused with a reason.
"""

import torch

from ...util.errors import UnsupportedOpError
from ..registry import importer
from .conv import _CONV_ATTRS, _check

MS = "com.microsoft"

# activation name → (number of activation_params, builder(ctx, x, params) → output name)
_ACTIVATIONS = {
    "Relu": (0, lambda ctx, x, p: ctx.add1("Relu", [x])),
    "Tanh": (0, lambda ctx, x, p: ctx.add1("Tanh", [x])),
    "Sigmoid": (0, lambda ctx, x, p: ctx.add1("Sigmoid", [x])),
    "LeakyRelu": (1, lambda ctx, x, p: ctx.add1("LeakyRelu", [x], {"alpha": p[0]})),
    "HardSigmoid": (2, lambda ctx, x, p: ctx.add1("HardSigmoid", [x], {"alpha": p[0], "beta": p[1]})),
    "Clip": (2, lambda ctx, x, p: ctx.add1("Clip", [x, _bound(ctx, x, p[0]), _bound(ctx, x, p[1])])),
}


def _bound(ctx, like, value):
    info = ctx.info(like)
    dt = info.dtype if info is not None and info.dtype is not None else torch.float32
    return ctx.const(torch.tensor(value, dtype=dt))


@importer("FusedConv", versions=(1,), domain=MS)
def import_fused_conv(ctx, node, inputs):
    """Conv (+ Z) → activation (Relu, Tanh, Sigmoid, LeakyRelu, Clip, HardSigmoid), as onnxruntime's fusion writes."""
    _check(ctx, node, inputs)
    name = node.attrs.get("activation", "") or ""
    params = [float(v) for v in (node.attrs.get("activation_params") or [])]
    if name and name not in _ACTIVATIONS:
        raise UnsupportedOpError(f"{node.where()}: FusedConv activation {name!r} is not supported",
                                 f"supported: {', '.join(sorted(_ACTIVATIONS))} (onnxruntime's MLAS activations)")
    if name:
        want = _ACTIVATIONS[name][0]
        if name == "LeakyRelu" and not params:
            params = [0.01]
        if len(params) != want:
            raise UnsupportedOpError(f"{node.where()}: FusedConv activation {name} takes {want} activation_params, "
                                     f"got {len(params)}", "re-run onnxruntime's optimizer or fix the attribute")
    attrs = {k: node.attrs[k] for k in _CONV_ATTRS if k in node.attrs}
    y = ctx.add1("Conv", inputs[:3] if len(inputs) > 2 and inputs[2] else inputs[:2], attrs)
    if len(inputs) > 3 and inputs[3]:
        y = ctx.add1("Add", [y, inputs[3]])
    return [_ACTIVATIONS[name][1](ctx, y, params) if name else y]
