"""EfficientNMS_TRT: TensorRT's efficient NMS plugin (YOLO / EfficientDet exports), plugin_version "1".

ONNX: op_type EfficientNMS_TRT in domain "" or "TRT"; inputs boxes [B, N, 4] or [B, N, C, 4], scores [B, N, C],
optional anchors [1|B, N, 4]; attributes score_threshold, iou_threshold, max_output_boxes, background_class,
score_activation, class_agnostic, box_coding (TensorRT's names); outputs num_detections, detection_boxes,
detection_scores, detection_classes. Triton covers the IoU + greedy suppression sweep (nms_common/kernel.py);
filtering, sorting and the output gather are fixed-shape torch ops. Semantics: reference.py.
"""

import torch

from ...desc import TensorDesc
from ...plugin import Plugin
from ....util.errors import PluginError
from .reference import efficient_nms


def describe(boxes: TensorDesc, scores: TensorDesc, anchors: TensorDesc | None = None, *, score_threshold: float,
             iou_threshold: float, max_output_boxes: int, background_class: int = -1, score_activation: bool = False,
             class_agnostic: bool = False, box_coding: int = 0):
    if scores.ndim != 3 or boxes.ndim not in (3, 4) or boxes.shape[-1] != 4:
        raise PluginError(f"EfficientNMS_TRT: boxes must be [B, N, 4] or [B, N, C, 4] and scores [B, N, C]; got "
                          f"{boxes} and {scores}", "check the exporter's inputs")
    if box_coding not in (0, 1):
        raise PluginError(f"EfficientNMS_TRT: box_coding must be 0 (corners) or 1 (center-size), got {box_coding}",
                          "export box_coding 0 or 1")
    if max_output_boxes < 1:
        raise PluginError(f"EfficientNMS_TRT: max_output_boxes must be ≥ 1, got {max_output_boxes}", "fix the export")
    B, K = boxes.shape[0], max_output_boxes
    return (boxes.new((B, 1), torch.int32), boxes.new((B, K, 4)), scores.new((B, K)), boxes.new((B, K), torch.int32))


PLUGIN = Plugin("EfficientNMS_TRT", describe, domains=("", "TRT"), num_outputs=4)


@PLUGIN.reference
def reference(boxes, scores, anchors=None, **attrs):
    return efficient_nms(boxes, scores, anchors, force_reference=True, **attrs)


@PLUGIN.impl
def impl(boxes, scores, anchors, num_detections, detection_boxes, detection_scores, detection_classes, stream=None,
         config=None, **attrs):
    outs = efficient_nms(boxes, scores, anchors, **attrs)
    for dst, src in zip((num_detections, detection_boxes, detection_scores, detection_classes), outs):
        dst.copy_(src)


PLUGINS = [PLUGIN]
