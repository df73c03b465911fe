"""MMCVMultiScaleDeformableAttention: Deformable DETR's sampling-attention core, as mmdeploy / mmcv export it.

ONNX: op_type MMCVMultiScaleDeformableAttention in domain "mmdeploy" (also accepted from "mmcv"); inputs value
[bs, keys, heads, D], value_spatial_shapes [L, 2] int64 (H, W), value_level_start_index [L] int64,
sampling_locations [bs, nq, heads, L, P, 2], attention_weights [bs, nq, heads, L, P]; attribute im2col_step
(a CUDA batching knob of mmcv, no effect here); output [bs, nq, heads·D]. Kernel: kernel.py; reference: reference.py.
"""

import torch

from ...desc import TensorDesc
from ...plugin import Plugin
from ...triton_util import use_triton
from ....util.errors import PluginError
from .reference import ms_deform_attn


def describe(value: TensorDesc, value_spatial_shapes: TensorDesc, value_level_start_index: TensorDesc,
             sampling_locations: TensorDesc, attention_weights: TensorDesc, *, im2col_step: int = 64):
    if value.ndim != 4 or sampling_locations.ndim != 6 or attention_weights.ndim != 5:
        raise PluginError(f"MMCVMultiScaleDeformableAttention: value must be [bs, keys, heads, D], "
                          f"sampling_locations [bs, nq, heads, L, P, 2], attention_weights [bs, nq, heads, L, P]; "
                          f"got {value}, {sampling_locations}, {attention_weights}", "check the exporter's inputs")
    bs, _, heads, d = value.shape
    return value.new((bs, sampling_locations.shape[1], heads * d))


PLUGIN = Plugin("mmdeploy::MMCVMultiScaleDeformableAttention", describe, domains=("mmdeploy", "mmcv"))


@PLUGIN.impl
def impl(value, value_spatial_shapes, value_level_start_index, sampling_locations, attention_weights, out, *,
         im2col_step, stream=None, config=None):
    if use_triton(value):
        from .kernel import launch
        cfg = config or {}
        launch(value.contiguous(), value_spatial_shapes.to(value.device, torch.int64).contiguous(),
               value_level_start_index.to(value.device, torch.int64).contiguous(),
               sampling_locations.contiguous(), attention_weights.contiguous(), out,
               cfg.get("BLOCK_D", 64), cfg.get("num_warps", 2))
    else:
        out.copy_(ms_deform_attn(value, value_spatial_shapes, value_level_start_index, sampling_locations,
                                 attention_weights))


PLUGIN.reference(ms_deform_attn)
PLUGINS = [PLUGIN]
