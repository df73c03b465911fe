"""BatchNormalization after Conv → folded into the Conv's weights and bias (no BN layer at run time).

Exporters: torch.onnx.export with `do_constant_folding=False`, `training=TrainingMode.PRESERVE`, or any
dynamo export (torch does not fold BN there), Keras/TF converters, and most ONNX model zoo files — every
ResNet/MobileNet/EfficientNet block. With per-channel s = γ / √(σ² + ε):

    w'[o, …] = w[o, …] · s[o]          b'[o] = (b[o] − μ[o]) · s[o] + β[o]

computed in float64 and rounded once to the weight dtype. Saves one read and one write of the conv output.
"""

import torch

from ..pattern import Const, Op
from .base import Rule


def _vector(c: torch.Tensor):
    if c.dim() == 1 and c.dtype.is_floating_point:
        return None
    return f"per-channel parameters must be float vectors, found {tuple(c.shape)}"


class ConvBatchNorm(Rule):
    """
        x ─► Conv(w, b?) ─► BatchNormalization(γ, β, μ, σ², ε) ─► y     ⇒     x ─► Conv(w', b') ─► y
    """

    name = "BN(Conv(x, w) + b) ⇒ Conv(x, w·s, (b−μ)·s+β),  s = γ/√(σ²+ε)"
    anchor = "BatchNormalization"
    pattern = Op("BatchNormalization", Op("Conv", any_inputs=True, name="conv"),
                 *(Const(name=n, scalar=False, pred=_vector) for n in ("gamma", "beta", "mean", "var")), name="bn")

    def check(self, m, g):
        conv = m["conv"]
        w = g.constant(conv.inputs[1]) if len(conv.inputs) > 1 else None
        if w is None:
            return f"the weights of {conv.name!r} are computed at run time"
        if not w.dtype.is_floating_point:
            return f"the weights of {conv.name!r} are {w.dtype}"
        b_name = conv.inputs[2] if len(conv.inputs) > 2 else ""
        if b_name and g.constant(b_name) is None:
            return f"the bias of {conv.name!r} is computed at run time"
        channels = w.shape[0]
        for key in ("gamma", "beta", "mean", "var"):
            if m[key + ".value"].numel() != channels:
                count = m[key + ".value"].numel()
                return f"BatchNormalization {key} has {count} entries for {channels} output channels"
        return None

    def rewrite(self, m, g):
        net, conv, bn = g.net, m["conv"], m["bn"]
        w = net.constants[conv.inputs[1]]
        b_name = conv.inputs[2] if len(conv.inputs) > 2 else ""
        gamma, beta, mean, var = (m[k + ".value"].double() for k in ("gamma", "beta", "mean", "var"))
        eps = float(bn.attrs.get("epsilon", 1e-5))
        s = gamma / torch.sqrt(var + eps)
        bias = net.constants[b_name].double() if b_name else torch.zeros_like(mean)
        w_new = (w.double() * s.reshape([-1] + [1] * (w.dim() - 1))).to(w.dtype)
        b_new = ((bias - mean) * s + beta).to(w.dtype)
        w_name = net.add_constant(net.unique_name(f"{conv.inputs[1]}/bn_folded"), w_new)
        b_name = net.add_constant(net.unique_name(f"{conv.name}/bias_bn_folded"), b_new)
        return [self.new_layer(g, m, "Conv", [conv.inputs[0], w_name, b_name], attrs=dict(conv.attrs),
                               suffix="/conv_bn")]


RULES = [ConvBatchNorm()]
