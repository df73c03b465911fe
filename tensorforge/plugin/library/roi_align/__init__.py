"""mmcv::MMCVRoiAlign (alias MMCVRoIAlign): RoIAlign as mmcv/mmdeploy export it for two-stage detectors.

ONNX: domain "mmcv" (or "mmdeploy"); inputs input [N, C, H, W], rois [K, 5] = (batch, x1, y1, x2, y2);
attributes output_height, output_width, spatial_scale, sampling_ratio, mode ("avg" | "max"), aligned (mmcv's
names); output [K, C, output_height, output_width]. Kernel: kernel.py (Triton); reference: reference.py.
"""

import torch

from ...desc import TensorDesc
from ...plugin import Plugin
from ...triton_util import use_triton
from ....util.errors import PluginError
from .reference import roi_align


def describe(input: TensorDesc, rois: TensorDesc, *, output_height: int, output_width: int,
             spatial_scale: float = 1.0, sampling_ratio: int = 0, mode: str = "avg", aligned: bool = True):
    if input.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 5:
        raise PluginError(f"MMCVRoiAlign: input must be [N, C, H, W] and rois [K, 5]; got {input} and {rois}",
                          "check the exporter's inputs")
    if mode not in ("avg", "max") or output_height < 1 or output_width < 1:
        raise PluginError(f"MMCVRoiAlign: mode must be 'avg' or 'max' and output sizes ≥ 1; got mode={mode!r}, "
                          f"output {output_height}x{output_width}", "fix the export")
    return input.new((rois.shape[0], input.shape[1], output_height, output_width))


PLUGIN = Plugin("mmcv::MMCVRoiAlign", describe, domains=("mmcv", "mmdeploy"), aliases=("MMCVRoIAlign",))


@PLUGIN.impl
def impl(input, rois, out, *, output_height, output_width, spatial_scale, sampling_ratio, mode, aligned,
         stream=None, config=None):
    if use_triton(input):
        from .kernel import launch
        launch(input.contiguous(), rois.to(input.device, torch.float32).contiguous(), out, spatial_scale,
               sampling_ratio, aligned, mode == "max")
    else:
        out.copy_(roi_align(input, rois, output_height=output_height, output_width=output_width,
                            spatial_scale=spatial_scale, sampling_ratio=sampling_ratio, mode=mode, aligned=aligned))


PLUGIN.reference(roi_align)
PLUGINS = [PLUGIN]
