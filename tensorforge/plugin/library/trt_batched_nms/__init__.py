"""mmdeploy::TRTBatchedNMS: the NMS mmdeploy exports for TensorRT (mmdet detectors), plugin_version "1".

ONNX: op_type TRTBatchedNMS in domain "mmdeploy"; inputs boxes [B, N, 1|C, 4], scores [B, N, C]; attributes
background_label_id, num_classes, topk, keep_topk, score_threshold, iou_threshold, is_normalized, clip_boxes,
return_index (mmdeploy's names); outputs dets [B, K, 5], labels [B, K] int32, and index [B, K] int32 when the
node has a third output (return_index=1). Triton covers the IoU + greedy sweep; the rest is fixed-shape torch.
"""

import torch

from ...desc import TensorDesc
from ...plugin import Plugin
from ....util.errors import PluginError
from ..nms_common import MAX_BOXES
from .reference import trt_batched_nms


def describe(boxes: TensorDesc, scores: TensorDesc, *, background_label_id: int = -1, num_classes: int, topk: int,
             keep_topk: int, score_threshold: float, iou_threshold: float, is_normalized: bool = True,
             clip_boxes: bool = True, return_index: bool = False):
    if scores.ndim != 3 or boxes.ndim != 4 or boxes.shape[-1] != 4:
        raise PluginError(f"TRTBatchedNMS: boxes must be [B, N, 1|C, 4] and scores [B, N, C]; got {boxes} and "
                          f"{scores}", "check the exporter's inputs")
    N = scores.shape[1]
    if isinstance(N, int):
        effective = topk if 0 < topk <= N else N
        if keep_topk > effective or effective > MAX_BOXES or keep_topk < 1:
            raise PluginError(f"TRTBatchedNMS: need 1 ≤ keep_topk ≤ topk ≤ {MAX_BOXES}, got keep_topk={keep_topk}, "
                              f"topk={effective} (N={N})", "mmdeploy's kernel leaves outputs unwritten; fix the export")
    B, K = boxes.shape[0], keep_topk
    return boxes.new((B, K, 5)), boxes.new((B, K), torch.int32), boxes.new((B, K), torch.int32)


PLUGIN = Plugin("mmdeploy::TRTBatchedNMS", describe, num_outputs=3, optional_outputs=1)   # index: return_index


@PLUGIN.reference
def reference(boxes, scores, **attrs):
    return trt_batched_nms(boxes, scores, force_reference=True, **attrs)


@PLUGIN.impl
def impl(boxes, scores, dets, labels, index, stream=None, config=None, **attrs):
    for dst, src in zip((dets, labels, index), trt_batched_nms(boxes, scores, **attrs)):
        dst.copy_(src)


PLUGINS = [PLUGIN]
