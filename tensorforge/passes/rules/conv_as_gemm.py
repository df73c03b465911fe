"""A 1×1 convolution over a 1×1 image is a fully connected layer → MatMulEpilogue between two views.

Squeeze-and-excite blocks (MobileNetV3, EfficientNet) pool to (N, C, 1, 1) and then run two 1×1 convolutions:
each is a GEMV, but as a convolution it costs cuDNN's kernel plus the epilogue kernel (bias, activation). As
MatMulEpilogue on (N, C) the GEMM tactics fuse bias and activation into one launch (cuBLAS bias epilogue or the
Triton GEMM), and the reshapes on either side are views. Same arithmetic: y[n, o] = act(Σ_c x[n, c]·W[o, c] + b[o]).
"""

import torch

from ..pattern import Op, Var
from .base import Rule


class PointConvAsGemm(Rule):
    """FusedConv/Conv(x (N, C, 1, 1), W (O, C, 1, 1), b) with group 1, no padding
        ⇒  Reshape(x, (−1, C)) → MatMulEpilogue(·, W (O, C), b, trans_b=1, act) → Reshape(·, (−1, O, 1, 1))"""

    name = "Conv1×1 on a 1×1 image ⇒ MatMulEpilogue"
    anchor = {"FusedConv", "Conv"}
    pattern = Op("FusedConv|Conv", Var("x"), Var("w"), any_inputs=True, name="conv")

    def check(self, m, g):
        conv = m["conv"]
        x, w = conv.inputs[0], conv.inputs[1]
        xs, ys = g.values(x), g.values(conv.outputs[0])
        if xs is None or ys is None:
            return "shapes unknown"
        if any(t.dim() != 4 or tuple(t.shape[2:]) != (1, 1) for t in xs + ys):
            return "the input or output image is not 1×1"
        weight = g.constant(w)
        if weight is None or weight.dim() != 4 or tuple(weight.shape[2:]) != (1, 1):
            return "the weight is not a constant 1×1 kernel"
        a = conv.attrs
        if int(a.get("group", 1)) != 1:
            return f"grouped convolution (group {a.get('group')})"
        if any(a.get("pads") or []) or a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
            return "the convolution pads its input"
        if len(conv.inputs) > 3 and conv.inputs[3]:
            return "a residual is added (kept as a convolution epilogue)"
        if len(conv.inputs) > 2 and conv.inputs[2] and g.constant(conv.inputs[2]) is None:
            return "the bias is computed at run time"
        m.binds["weight"] = weight
        return None

    def rewrite(self, m, g):
        net, conv = g.net, m["conv"]
        weight = m["weight"]
        out_c, in_c = weight.shape[0], weight.shape[1]

        def const(suffix, value):
            return net.add_constant(net.unique_name(f"{conv.name}/{suffix}"), value)
        rows, product = self.fresh_tensor(g, f"{conv.name}/rows"), self.fresh_tensor(g, f"{conv.name}/fc")
        w2 = const("fc_weight", weight.reshape(out_c, in_c).contiguous().clone())
        inputs = [rows, w2] + ([conv.inputs[2]] if len(conv.inputs) > 2 and conv.inputs[2] else [])
        attrs = {"trans_b": 1, "scale": 1.0, "activation": "none", "alpha": 0.0, "beta": 0.0, "residual_first": 0}
        if conv.op == "FusedConv":
            attrs.update({k: conv.attrs[k] for k in ("activation", "alpha", "beta") if k in conv.attrs})
        return [self.new_layer(g, m, "Reshape", [conv.inputs[0], const("rows_shape", torch.tensor([-1, in_c]))],
                               [rows], {"allowzero": 0}, suffix="/rows"),
                self.new_layer(g, m, "MatMulEpilogue", inputs, [product], attrs, suffix="/fc"),
                self.new_layer(g, m, "Reshape", [product, const("image_shape", torch.tensor([-1, out_c, 1, 1]))],
                               attrs={"allowzero": 0}, suffix="/image")]


RULES = [PointConvAsGemm()]
