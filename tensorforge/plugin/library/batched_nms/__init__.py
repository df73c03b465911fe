"""BatchedNMSDynamic_TRT: TensorRT's batched (per-class) NMS plugin, plugin_version "1".

ONNX: op_type BatchedNMSDynamic_TRT in domain "" or "TRT"; inputs boxes [B, N, 1|C, 4] (or [B, N, 4]) and scores
[B, N, C]; attributes shareLocation, backgroundLabelId, numClasses, topK, keepTopK, scoreThreshold, iouThreshold,
isNormalized, clipBoxes, scoreBits, caffeSemantics (TensorRT's field names; scoreBits only tunes TensorRT's fp16
sort and has no effect here); outputs num_detections, nmsed_boxes, nmsed_scores, nmsed_classes.
Triton covers the IoU + greedy suppression sweep (nms_common/kernel.py); the rest is fixed-shape torch.
"""

import torch

from ...desc import TensorDesc
from ...plugin import Plugin
from ....util.errors import PluginError
from ..nms_common import MAX_BOXES
from .reference import batched_nms


def describe(boxes: TensorDesc, scores: TensorDesc, *, shareLocation: bool = True, backgroundLabelId: int = -1,
             numClasses: int, topK: int, keepTopK: int, scoreThreshold: float, iouThreshold: float,
             isNormalized: bool = True, clipBoxes: bool = True, scoreBits: int = 16, caffeSemantics: bool = True):
    if scores.ndim != 3 or boxes.ndim not in (3, 4) or boxes.shape[-1] != 4:
        raise PluginError(f"BatchedNMSDynamic_TRT: boxes must be [B, N, 1|C, 4] and scores [B, N, C]; got {boxes} "
                          f"and {scores}", "check the exporter's inputs")
    if isinstance(scores.shape[2], int) and scores.shape[2] != numClasses:
        raise PluginError(f"BatchedNMSDynamic_TRT: numClasses={numClasses} but scores have {scores.shape[2]} classes",
                          "export numClasses equal to the scores' last dimension")
    if keepTopK > topK or topK > MAX_BOXES or keepTopK < 1:
        raise PluginError(f"BatchedNMSDynamic_TRT: need 1 ≤ keepTopK ≤ topK ≤ {MAX_BOXES}, got keepTopK={keepTopK}, "
                          f"topK={topK}", "TensorRT leaves the outputs unwritten when keepTopK > topK; fix the export")
    B, K = boxes.shape[0], keepTopK
    return boxes.new((B, 1), torch.int32), boxes.new((B, K, 4)), boxes.new((B, K)), boxes.new((B, K))


PLUGIN = Plugin("BatchedNMSDynamic_TRT", describe, domains=("", "TRT"), num_outputs=4)


@PLUGIN.reference
def reference(boxes, scores, **attrs):
    return batched_nms(boxes, scores, force_reference=True, **attrs)


@PLUGIN.impl
def impl(boxes, scores, num_detections, nmsed_boxes, nmsed_scores, nmsed_classes, stream=None, config=None,
         **attrs):
    outs = batched_nms(boxes, scores, **attrs)
    for dst, src in zip((num_detections, nmsed_boxes, nmsed_scores, nmsed_classes), outs):
        dst.copy_(src)


PLUGINS = [PLUGIN]
