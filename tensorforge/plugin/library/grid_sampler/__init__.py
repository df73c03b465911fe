"""grid_sampler: torch's grid_sample as mmcv / mmdeploy export it (domain "mmcv" or "mmdeploy").

ONNX: inputs input [N, C, H, W], grid [N, OH, OW, 2]; attributes interpolation_mode (0 bilinear, 1 nearest),
padding_mode (0 zeros, 1 border, 2 reflection), align_corners (mmcv's names and torch's enum values); output
[N, C, OH, OW]. Bicubic (2) is refused, as by mmdeploy's TensorRT plugin. Kernel: kernel.py; reference: reference.py.
"""

import torch

from ...desc import TensorDesc
from ...plugin import Plugin
from ...triton_util import use_triton
from ....util.errors import PluginError
from .reference import grid_sampler


def describe(input: TensorDesc, grid: TensorDesc, *, interpolation_mode: int = 0, padding_mode: int = 0,
             align_corners: bool = False):
    if input.ndim != 4 or grid.ndim != 4 or grid.shape[3] != 2:
        raise PluginError(f"grid_sampler: input must be [N, C, H, W] and grid [N, OH, OW, 2]; got {input} and {grid}",
                          "only 2-D sampling is supported")
    if interpolation_mode not in (0, 1) or padding_mode not in (0, 1, 2):
        raise PluginError(f"grid_sampler: interpolation_mode {interpolation_mode} / padding_mode {padding_mode} is "
                          "not supported (bilinear 0 and nearest 1; zeros 0, border 1, reflection 2)",
                          "export with bilinear or nearest interpolation")
    return input.new((input.shape[0], input.shape[1], grid.shape[1], grid.shape[2]))


PLUGIN = Plugin("mmcv::grid_sampler", describe, domains=("mmcv", "mmdeploy"))


@PLUGIN.impl
def impl(input, grid, out, *, interpolation_mode, padding_mode, align_corners, stream=None, config=None):
    if use_triton(input):
        from .kernel import launch
        cfg = config or {}
        launch(input.contiguous(), grid.to(torch.float32).contiguous(), out, interpolation_mode, padding_mode,
               align_corners, cfg.get("BLOCK_P", 128), cfg.get("num_warps", 4))
    else:
        out.copy_(grid_sampler(input, grid, interpolation_mode=interpolation_mode, padding_mode=padding_mode,
                               align_corners=align_corners))


PLUGIN.reference(grid_sampler)


@PLUGIN.autotune
def configs():
    return [{"BLOCK_P": 128, "num_warps": 4}, {"BLOCK_P": 256, "num_warps": 8}]


PLUGINS = [PLUGIN]
