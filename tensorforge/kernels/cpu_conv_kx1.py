"""CPU: a K×1 convolution (kernel width 1, no padding along the width) as a 1-D convolution along the height.

    y[n, o, p, q] = b[o] + Σ_{c, k} x[n, c, p·s_h + k·d_h − pad_h, q·s_w] · w[o, c, k, 0]

so every output column q is conv1d over the input column q·s_w. With the width 1 (speech and text models feed
(N, C, T, 1)) the reshape to (N, C, T) is free and torch's conv1d path is several times faster than its 2-D path
on this shape (issue 18.5). With width > 1 the kept columns are moved to the batch axis first: one copy of x and
one of y. Traffic: x and w read once, y written once (plus those copies when the width is not 1).
Conv and FusedConv (bias, activation, PRelu slope, residual: the torch epilogue of kernels/torch_fused.py).
`fits()` takes only width-1 inputs, so untimed builds choose it only there; timed builds time it everywhere.
"""

import torch
import torch.nn.functional as F

from .registry import tactic
from .torch_fused import epilogue_, epilogue_attrs


def _reason(layer, device) -> str | None:
    if device.type != "cpu":
        return "a CPU lowering (cuDNN has its own fast paths for K×1 kernels)"
    a = layer.attrs
    ks = a.get("kernel_shape")
    if ks is None or len(ks) != 2 or int(ks[1]) != 1:
        return f"kernel_shape {ks} is not K×1"
    if a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return f"auto_pad {a.get('auto_pad')} (only explicit pads are lowered)"
    pads = list(a.get("pads") or [0, 0, 0, 0])
    if pads[1] or pads[3]:
        return f"pads {pads} pad the width"
    if pads[0] != pads[2]:
        return f"pads {pads} are asymmetric along the height"
    return None


def _geometry(a: dict):
    pads = list(a.get("pads") or [0, 0, 0, 0])
    strides = list(a.get("strides") or [1, 1])
    dil = list(a.get("dilations") or [1, 1])
    return int(strides[0]), int(strides[1]), int(pads[0]), int(dil[0]), int(a.get("group", 1) or 1)


def _conv_kx1(x, w, bias, a):
    sh, sw, ph, dh, groups = _geometry(a)
    n, c, h, width = x.shape
    w1 = w[..., 0]
    if width == 1:
        y = F.conv1d(x.reshape(n, c, h), w1, bias, stride=sh, padding=ph, dilation=dh, groups=groups)
        return y.unsqueeze(-1)
    cols = x[..., ::sw]
    wo = cols.shape[-1]
    xb = cols.permute(0, 3, 1, 2).reshape(n * wo, c, h)
    y = F.conv1d(xb, w1, bias, stride=sh, padding=ph, dilation=dh, groups=groups)
    return y.reshape(n, wo, y.shape[1], y.shape[2]).permute(0, 2, 3, 1).contiguous()


def _fits(layer, cfg, inputs):
    x = inputs[0]
    if x is None or x.dim() != 4:
        return "the input is not 4-D"
    return None if x.shape[-1] == 1 else f"input width {x.shape[-1]} ≠ 1 (the width-1 case is the free reshape)"


@tactic("Conv", name="cpu_conv_kx1", priority=10)
class ConvKx1:
    supports = staticmethod(_reason)
    fits = staticmethod(_fits)

    @staticmethod
    def build(layer, cfg, device):
        a = dict(layer.attrs)

        def run(inputs):
            return [_conv_kx1(inputs[0], inputs[1], inputs[2] if len(inputs) > 2 else None, a)]
        return run


@tactic("FusedConv", name="cpu_conv_kx1", priority=10)
class FusedConvKx1:
    supports = staticmethod(_reason)
    fits = staticmethod(_fits)

    @staticmethod
    def build(layer, cfg, device):
        a = dict(layer.attrs)
        act, alpha, beta, res_first = epilogue_attrs(a)

        def run(inputs):
            pick = [inputs[k] if len(inputs) > k else None for k in range(5)]
            y = _conv_kx1(pick[0], pick[1], pick[2], a)
            return [epilogue_(y, pick[3], act, alpha, beta, res_first, pick[4])]
        return run
