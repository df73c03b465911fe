"""mmcv::MMCVModulatedDeformConv2d: modulated deformable convolution (DCNv2) as mmcv exports it.

ONNX: domain "mmcv"; inputs input [N, Cin, H, W], offset [N, 2·dg·kh·kw, Ho, Wo], mask [N, dg·kh·kw, Ho, Wo],
weight [Cout, Cin/groups, kh, kw], optional bias [Cout]; attributes stride, padding, dilation (2 ints each),
groups, deform_groups (mmcv's names); output [N, Cout, Ho, Wo]. Triton covers the deformable im2col
(kernel.py); the grouped GEMM is torch (cuBLAS on GPU). Reference: reference.py.
"""

import torch

from ...desc import TensorDesc
from ...plugin import Plugin
from ...triton_util import use_triton
from ....util.errors import PluginError
from .reference import conv_from_columns, modulated_deform_conv, output_size


def _pair(v, name):
    if len(v) == 1:
        return [v[0], v[0]]
    if len(v) != 2:
        raise PluginError(f"MMCVModulatedDeformConv2d: {name} must have 2 values, got {v}", "export a 2-D convolution")
    return list(v)


def describe(input: TensorDesc, offset: TensorDesc, mask: TensorDesc, weight: TensorDesc,
             bias: TensorDesc | None = None, *, stride: list[int] = (1, 1), padding: list[int] = (0, 0),
             dilation: list[int] = (1, 1), groups: int = 1, deform_groups: int = 1):
    if input.ndim != 4 or weight.ndim != 4 or offset.ndim != 4 or mask.ndim != 4:
        raise PluginError(f"MMCVModulatedDeformConv2d: 4-D input/offset/mask/weight expected; got {input}, {offset}, "
                          f"{mask}, {weight}", "only 2-D deformable convolution is supported")
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride, "stride"), _pair(padding, "padding"), _pair(dilation, "dilation")
    kh, kw = weight.shape[2], weight.shape[3]
    ho, wo = output_size(input.shape[2], kh, sh, ph, dh), output_size(input.shape[3], kw, sw, pw, dw)
    if isinstance(ho, int) and isinstance(offset.shape[2], int) and (offset.shape[2], offset.shape[3]) != (ho, wo):
        raise PluginError(f"MMCVModulatedDeformConv2d: offset is {offset} but the output is {ho}x{wo}",
                          "check stride/padding/dilation against the offset branch")
    if isinstance(offset.shape[1], int) and offset.shape[1] != 2 * deform_groups * kh * kw:
        raise PluginError(f"MMCVModulatedDeformConv2d: offset has {offset.shape[1]} channels, expected "
                          f"2·{deform_groups}·{kh}·{kw}", "check deform_groups and the kernel size")
    return input.new((input.shape[0], weight.shape[0], ho, wo))


PLUGIN = Plugin("mmcv::MMCVModulatedDeformConv2d", describe, domains=("mmcv", "mmdeploy"))


@PLUGIN.impl
def impl(input, offset, mask, weight, bias, out, *, stride, padding, dilation, groups, deform_groups,
         stream=None, config=None):
    stride, padding, dilation = _pair(stride, "stride"), _pair(padding, "padding"), _pair(dilation, "dilation")
    if not use_triton(input):
        out.copy_(modulated_deform_conv(input, offset, mask, weight, bias, stride=stride, padding=padding,
                                        dilation=dilation, groups=groups, deform_groups=deform_groups))
        return
    from .kernel import launch
    N, Cin = input.shape[:2]
    kh, kw = weight.shape[2], weight.shape[3]
    Ho, Wo = out.shape[2], out.shape[3]
    cols = torch.empty(N, Cin * kh * kw, Ho * Wo, dtype=input.dtype, device=input.device)
    cfg = config or {}
    launch(input.contiguous(), offset.contiguous(), mask.contiguous(), cols, kh, kw, stride, padding, dilation,
           deform_groups, cfg.get("BLOCK_P", 128), cfg.get("num_warps", 4))
    out.copy_(conv_from_columns(cols, weight, bias, groups, Ho, Wo))


@PLUGIN.reference
def reference(input, offset, mask, weight, bias=None, **attrs):
    attrs = {**attrs, **{k: _pair(attrs[k], k) for k in ("stride", "padding", "dilation") if k in attrs}}
    return modulated_deform_conv(input, offset, mask, weight, bias, **attrs)


PLUGINS = [PLUGIN]
