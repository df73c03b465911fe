"""Convolutions that are GEMMs → MatMulEpilogue between views: a 1×1 convolution over a 1×1 image (a fully
connected layer), and a patch embedding (kernel = stride, no padding) over an input of few channels.

Squeeze-and-excite blocks (MobileNetV3, EfficientNet) pool to (N, C, 1, 1) and then run two 1×1 convolutions:
each is a GEMV, but as a convolution it costs cuDNN's kernel plus the epilogue kernel (bias, activation). As
MatMulEpilogue on (N, C) the GEMM tactics fuse bias and activation into one launch (cuBLAS bias epilogue or the
Triton GEMM), and the reshapes on either side are views. Same arithmetic: y[n, o] = act(Σ_c x[n, c]·W[o, c] + b[o]).

A patch embedding — ViT's 16×16 convolution with stride 16 over the RGB image, ConvNeXt's 4×4 stem — reads each
input pixel once: im2col is a permutation, (N, C, OH·kh, OW·kw) → (N·OH·OW, C·kh·kw), and the product a GEMM
with K = C·kh·kw. cuDNN's kernels want the channels in multiples of 8: with C = 3 it pads the input and runs a
generic kernel (ViT-B/16 at batch 32 on the H200: 241.7 µs + 17.5 µs of padding, 8 % of the engine's kernel time,
for 7.4 GFLOP that a GEMM runs in ~15 µs). As Reshape → Transpose → Reshape (one copy of the input) →
MatMulEpilogue → Transpose, the output's Transpose back to NCHW is a view of channels-last rows, so ViT's
Reshape(N, C, OH·OW) → Transpose(0, 2, 1) after it is a view too. Only where C is not a multiple of 8: with
C % 8 = 0 cuDNN's implicit GEMM reads the input in place, with no copy.
"""

import torch

from ..pattern import Op, Var
from .base import Rule


def _const(net, conv, suffix: str, value) -> str:
    """A new constant named after the convolution."""
    return net.add_constant(net.unique_name(f"{conv.name}/{suffix}"), torch.as_tensor(value))


def _gemm_operands(net, conv, rows: str, w_matrix: torch.Tensor, w_suffix: str) -> tuple[list[str], dict]:
    """MatMulEpilogue's inputs (rows, W (O, K) as a new constant, the conv's bias if any) and attributes (trans_b,
    and a FusedConv's activation) for a convolution run as the GEMM rows · Wᵀ."""
    w2 = _const(net, conv, w_suffix, w_matrix.contiguous().clone())
    inputs = [rows, w2] + ([conv.inputs[2]] if len(conv.inputs) > 2 and conv.inputs[2] else [])
    attrs = {"trans_b": 1, "scale": 1.0, "activation": "none", "alpha": 0.0, "beta": 0.0, "residual_first": 0}
    if conv.op == "FusedConv":
        attrs.update({k: conv.attrs[k] for k in ("activation", "alpha", "beta") if k in conv.attrs})
    return inputs, attrs


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

        rows, product = self.fresh_tensor(g, f"{conv.name}/rows"), self.fresh_tensor(g, f"{conv.name}/fc")
        inputs, attrs = _gemm_operands(net, conv, rows, weight.reshape(out_c, in_c), "fc_weight")
        return [self.new_layer(g, m, "Reshape", [conv.inputs[0], _const(net, conv, "rows_shape", [-1, in_c])],
                               [rows], {"allowzero": 0}, suffix="/rows"),
                self.new_layer(g, m, "MatMulEpilogue", inputs, [product], attrs, suffix="/fc"),
                self.new_layer(g, m, "Reshape", [product, _const(net, conv, "image_shape", [-1, out_c, 1, 1])],
                               attrs={"allowzero": 0}, suffix="/image")]


class PatchConvAsGemm(Rule):
    """FusedConv/Conv(x (N, C, H, W), W (O, C, kh, kw), b) with strides = (kh, kw), no padding, dilation 1, group 1,
    C % 8 ≠ 0, H and W static multiples of kh and kw
        ⇒  Reshape(x, (N, C, OH, kh, OW, kw)) → Transpose(0, 2, 4, 1, 3, 5) → Reshape(·, (N, OH, OW, C·kh·kw))
           → MatMulEpilogue(·, W (O, C·kh·kw), b, trans_b=1, act) → Transpose(0, 3, 1, 2)"""

    name = "patch convolution (kernel = stride) on few channels ⇒ MatMulEpilogue"
    anchor = {"FusedConv", "Conv"}
    pattern = Op("FusedConv|Conv", Var("x"), Var("w"), any_inputs=True, name="conv")

    def check(self, m, g):
        conv = m["conv"]
        weight = g.constant(conv.inputs[1])
        if weight is None or weight.dim() != 4:
            return "the weight is not a constant 2-D kernel"
        kh, kw = int(weight.shape[2]), int(weight.shape[3])
        if (kh, kw) == (1, 1):
            return "a 1×1 kernel"
        a = conv.attrs
        if [int(s) for s in (a.get("strides") or (1, 1))] != [kh, kw]:
            return f"strides {a.get('strides')} are not the kernel {[kh, kw]}: windows overlap or skip"
        if int(a.get("group", 1)) != 1 or any(a.get("pads") or []) or any(int(d) != 1 for d in a.get("dilations") or []) \
                or a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
            return "grouped, padded or dilated"
        if weight.shape[1] % 8 == 0:
            return f"{weight.shape[1]} input channels (a multiple of 8): cuDNN's implicit GEMM reads them in place"
        if len(conv.inputs) > 3 and conv.inputs[3]:
            return "a residual is added (kept as a convolution epilogue)"
        if len(conv.inputs) > 2 and conv.inputs[2] and g.constant(conv.inputs[2]) is None:
            return "the bias is computed at run time"
        xs = g.values(conv.inputs[0])
        if xs is None:
            return "shapes unknown"
        sizes = {tuple(x.shape[2:]) for x in xs}
        if len(sizes) != 1 or any(x.dim() != 4 for x in xs):
            return f"the image size is not static ({sorted(sizes)})"
        h, w = next(iter(sizes))
        if h % kh or w % kw:
            return f"the image {h}×{w} is not a whole number of {kh}×{kw} patches"
        m.binds.update(weight=weight, grid=(h // kh, w // kw))
        return None

    def rewrite(self, m, g):
        net, conv = g.net, m["conv"]
        weight, (oh, ow) = m["weight"], m["grid"]
        out_c, in_c, kh, kw = (int(s) for s in weight.shape)

        split, patches, rows, product = (self.fresh_tensor(g, f"{conv.name}/{s}")
                                         for s in ("split", "patches", "rows", "product"))
        inputs, attrs = _gemm_operands(net, conv, rows, weight.reshape(out_c, in_c * kh * kw), "patch_weight")
        split_shape = _const(net, conv, "split_shape", [0, in_c, oh, kh, ow, kw])
        rows_shape = _const(net, conv, "rows_shape", [0, oh, ow, in_c * kh * kw])
        return [self.new_layer(g, m, "Reshape", [conv.inputs[0], split_shape], [split], {"allowzero": 0},
                               suffix="/split"),
                self.new_layer(g, m, "Transpose", [split], [patches], {"perm": [0, 2, 4, 1, 3, 5]}, suffix="/patches"),
                self.new_layer(g, m, "Reshape", [patches, rows_shape], [rows], {"allowzero": 0}, suffix="/rows"),
                self.new_layer(g, m, "MatMulEpilogue", inputs, [product], attrs, suffix="/gemm"),
                self.new_layer(g, m, "Transpose", [product], attrs={"perm": [0, 3, 1, 2]}, suffix="/nchw")]


RULES = [PointConvAsGemm(), PatchConvAsGemm()]
