"""Tactics: Conv, FusedConv and FusedConvPool on the CPU as oneDNN primitives created once per input shape.

    y = post_ops(conv(x, W) + bias)      post_ops in the layer's order: the activation (any epilogue activation,
                                         PRelu included, as an eltwise or prelu post-op) and the residual add
                                         (a binary post-op), before or after the activation as residual_first says
x arrives channels-last (NHWC; one copy at a chain's first layer, free after another convolution), y leaves
channels-last. Per call: one output allocation, the data pointers set on the primitive's memories and one
`dnnl_primitive_execute` (kernels/onednn_capi.py) — no descriptor creation, which torch's `_convolution_pointwise`
(cpu_conv_onednn.py, the same library) repeats on every call. Traffic: x, the packed W, the bias (and the residual,
the PRelu slope) read once, y written once.

The weight is reordered once into the layout the primitive asks for, per (weight tensor, layout): the contexts of
one engine share their CPU weight tensors, so it is packed once per engine and layout (onednn_capi.PACK_COUNT).
Asymmetric pads, groups (depthwise included) and dilations are the primitive's own parameters. A residual that
only broadcasts to y (oneDNN's binary post-op takes it, but the ONNX broadcast is kept exact here) runs the rest of
the epilogue through torch's in-place epilogue.

Priority above cpu_onednn_nhwc: the CPU convolutions' untimed first fit (builder/tactics.py `_layout_bound`) when
the library is installed; without it `supports` says so and cpu_onednn_nhwc is the first fit.
"""

import torch

from . import onednn_capi as dn
from .cpu_conv_onednn import _fits, _geometry, check_operands, conv_pool_kernel, fusable_residual, static_geometry
from .registry import tactic
from .torch_fused import epilogue_, epilogue_attrs


def _reason(layer, device) -> str | None:
    why = dn.tactic_reason(layer, device)
    if why is not None:
        return why
    ks = layer.attrs.get("kernel_shape")
    if ks is not None and len(ks) != 2:
        return f"only 2-D convolutions (kernel_shape {list(ks)})"
    return None


def _nhwc(n, c, h, w):
    return [n, c, h, w], [h * w * c, 1, w * c, c]


class ConvPrimitive(dn.WeightedPrimitive):
    """One convolution primitive for one input shape and one post-op list.
    posts: [("act", act, alpha, beta) | ("add",) | ("prelu", per_channel)] in order. Execute operands:
    x, packed W, [bias], y, then per post-op that takes one: the residual (NHWC, y's shape) or the slope."""

    def __init__(self, lib, x_shape, w_shape, static, has_bias: bool, posts):
        n, c, h, w_ = x_shape
        k, kh, kw = w_shape[0], w_shape[2], w_shape[3]
        out, begin, end, strides, dilations, groups = _geometry(static, tuple(x_shape[2:]), tuple(w_shape[2:]))
        self.y_shape = (n, k, *out)
        src, dst = lib.md(*_nhwc(n, c, h, w_)), lib.md(*_nhwc(n, k, *out))
        self.w_dims = [k, c // groups, kh, kw] if groups == 1 else [groups, k // groups, c // groups, kh, kw]
        wany = lib.md_any(self.w_dims)
        bias = lib.md([k], [1]) if has_bias else None
        # prelu: a slope per channel (mask on dim 1) or one slope
        posts = [p if p[0] != "prelu" else ("prelu", lib.md([1, k, 1, 1], [k, 1, 1, 1]), 2) if p[1] else
                 ("prelu", lib.md([1, 1, 1, 1], [1, 1, 1, 1]), 0) for p in posts]

        def create(pd, attr):
            return lib.c.dnnl_convolution_forward_primitive_desc_create(
                pd, lib.engine, dn.FORWARD_INFERENCE, dn.CONV_DIRECT, src.handle, wany.handle,
                bias.handle if bias else None, dst.handle, dn.Dims(*strides), dn.Dims(*[d - 1 for d in dilations]),
                dn.Dims(*begin), dn.Dims(*end), attr)
        super().__init__(lib, src, wany, bias, dst, posts, create, f"convolution {list(x_shape)} * {list(w_shape)}")

    def packed(self, lib, w: torch.Tensor) -> torch.Tensor:
        """W in this primitive's weight layout (onednn_capi.PackedSlot: once per engine and layout)."""
        return self.weights.get(lib, w, lambda: (w.detach().to(torch.float32).contiguous(), self.w_dims,
                                                 dn.contiguous_strides(self.w_dims)))


class ConvRunner:
    """run(x, w, bias, residual, slope) -> y for one layer: a primitive per (input shape, post-op list, thread count:
    oneDNN sizes a primitive's thread team when it is created, so it is made under the count it runs at), created on
    first use and kept. The whole epilogue rides as post-ops unless the residual only broadcasts to y or the PRelu
    slope is neither per channel nor one value: then the convolution and bias run here and torch's in-place epilogue
    finishes (as cpu_conv_onednn does). The bias and slope are converted once per tensor seen."""

    def __init__(self, layer, act="none", alpha=0.0, beta=0.0, res_first=0):
        self.layer, self.static = layer, static_geometry(layer.attrs)
        self.act, self.alpha, self.beta, self.res_first = act, alpha, beta, res_first
        self.lib = dn.library()
        self.prims = dn.PrimitiveTable()
        self.bias, self.slope = dn.LastDerived(), dn.LastDerived()
        # post-op lists by (residual fused, slope per channel): made once here, not per call
        self.posts = {(res, per_channel): self._posts(res, per_channel)
                      for res in (False, True) for per_channel in (False, True)}

    def _posts(self, residual: bool, per_channel: bool) -> tuple:
        act = () if self.act == "none" else (
            (("prelu", per_channel),) if self.act == "PRelu" else (("act", self.act, self.alpha, self.beta),))
        if not residual:
            return act
        return (("add",),) + act if self.res_first else act + (("add",),)

    def __call__(self, x, w, bias=None, residual=None, slope=None):
        check_operands(self.layer, x, w, "cpu_dnnl")
        fuse_res = residual is not None and fusable_residual(self.static, x, w, residual)
        fuse_act = self.act != "PRelu" or (slope is not None and slope.numel() in (1, w.shape[0]))
        if fuse_act and (residual is None or fuse_res):
            posts = self.posts[fuse_res, slope is not None and slope.numel() != 1]
            return self._execute(x, w, bias, posts, residual, slope)
        y = self._execute(x, w, bias, (), None, None)
        return epilogue_(y, residual, self.act, self.alpha, self.beta, self.res_first, slope)

    def _execute(self, x, w, bias, posts: tuple, residual, slope):
        x = x.contiguous(memory_format=torch.channels_last)
        shape = tuple(x.shape)
        p = self.prims.get((shape, bias is not None, posts, torch.get_num_threads()),
                           lambda: ConvPrimitive(self.lib, shape, tuple(w.shape), self.static, bias is not None, posts))
        y = torch.empty(p.y_shape, memory_format=torch.channels_last)
        operands = [x, p.packed(self.lib, w)]
        if bias is not None:
            operands.append(self.bias.get(bias, lambda: dn.bias_vector(bias, w.shape[0])))
        operands.append(y)
        for kind in p.post_operands:
            operands.append(residual.to(torch.float32).contiguous(memory_format=torch.channels_last)
                            if kind == "residual" else
                            self.slope.get(slope, lambda: slope.reshape(-1).to(torch.float32).contiguous()))
        p.prim.execute([t.data_ptr() for t in operands])
        return y


@tactic("Conv", name="cpu_dnnl", priority=9)
class ConvDnnl:
    supports = staticmethod(_reason)
    fits = staticmethod(_fits)

    @staticmethod
    def build(layer, cfg, device):
        run = ConvRunner(layer)
        return lambda inputs: [run(inputs[0], inputs[1], inputs[2] if len(inputs) > 2 else None)]


def _fused(layer) -> ConvRunner:
    return ConvRunner(layer, *epilogue_attrs(layer.attrs))


def _operands(inputs):
    return [inputs[k] if len(inputs) > k else None for k in range(5)]


@tactic("FusedConv", name="cpu_dnnl", priority=9)
class FusedConvDnnl:
    supports = staticmethod(_reason)
    fits = staticmethod(_fits)

    @staticmethod
    def build(layer, cfg, device):
        run = _fused(layer)
        return lambda inputs: [run(*_operands(inputs))]


@tactic("FusedConvPool", name="cpu_dnnl", priority=9)
class FusedConvPoolDnnl:
    """FusedConv here, then P = mean of y over its positions (y is not returned when nothing else reads it)."""
    supports = staticmethod(_reason)
    fits = staticmethod(_fits)

    @staticmethod
    def build(layer, cfg, device):
        run = _fused(layer)
        return conv_pool_kernel(layer, lambda inputs: run(*_operands(inputs)))
