"""Conv in the channels-last (NHWC) layout: the layout cuDNN's tensor-core kernels want on a GPU.

Tactics `conv.cudnn_channels_last` and `fusedconv.cudnn_channels_last`: the op's reference run on an NHWC copy
of x and of the weights (converted once per context and kept), so cuDNN picks its NHWC kernels and returns an NHWC-strided y. Elementwise, pooling and
normalisation references keep that layout, so a chain of such convolutions converts only at its first input:

    x (NCHW) ─copy→ x (NHWC) ─conv→ y (NHWC) ─relu→ (NHWC) ─conv→ ...      traffic: one extra read+write of x

Consumers get correctly strided tensors; a kernel that assumes contiguous memory must call `.contiguous()`.
The builder times it against the NCHW reference on the strides the producers really emit, so it is chosen only
where faster. CPU builds reject it (oneDNN picks its own blocked layouts), as do untimed builds (low priority).
"""

import torch

from ..ir import get_spec
from .registry import tactic


class _ChannelsLast:
    @staticmethod
    def supports(layer, device):
        if device.type != "cuda":
            return "channels-last convolution is a cuDNN layout; CPU builds keep NCHW"
        ks = layer.attrs.get("kernel_shape")
        if ks is not None and len(ks) != 2:
            return f"only 2-D convolutions have a channels-last layout (kernel_shape {list(ks)})"
        return None

    @staticmethod
    def build(layer, cfg, device):
        ref, attrs = get_spec(layer.op).reference, dict(layer.attrs)
        kept: list = [None, None]          # (weight tensor seen, its NHWC copy)

        def run(inputs):
            x, w, rest = inputs[0], inputs[1], list(inputs[2:])
            if x.dim() != 4:
                raise ValueError(f"channels-last convolution needs a 4-D input, got {x.dim()}-D")
            if kept[0] is not w:
                kept[0], kept[1] = w, w.contiguous(memory_format=torch.channels_last)
            return [ref(x.contiguous(memory_format=torch.channels_last), kept[1], *rest, **attrs)]
        return run


@tactic("Conv", name="cudnn_channels_last", priority=-150)
class ConvChannelsLast(_ChannelsLast):
    """Conv(x, w[, b])."""


@tactic("FusedConv", name="cudnn_channels_last", priority=-150)
class FusedConvChannelsLast(_ChannelsLast):
    """FusedConv(x, w[, bias[, residual]]) of passes/rules/epilogue.py: the epilogue runs on the NHWC result."""
