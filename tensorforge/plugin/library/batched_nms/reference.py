"""BatchedNMSDynamic_TRT in torch, from TensorRT's batchedNMSPlugin documentation and its public kernels.

Per image and class c ≠ backgroundLabelId: boxes with score > scoreThreshold, best topK by score; greedy NMS
drops a box when a kept one overlaps it with IoU > iouThreshold (corners reordered; for pixel boxes,
isNormalized=0, widths are x2 − x1 + 1 and, with caffeSemantics, so are the intersection's); survivors of all
classes sorted by score, the best keepTopK written. clipBoxes clamps output boxes to [0, 1].
Outputs: num_detections [B, 1] int32, nmsed_boxes [B, K, 4], nmsed_scores [B, K], nmsed_classes [B, K] (float,
−1 in empty slots; empty boxes/scores are 0). boxes [B, N, 1|C, 4] (shareLocation ⇔ 1), scores [B, N, C].
"""

from ..nms_common.batched import per_class_nms


def batched_nms(boxes, scores, *, shareLocation=True, backgroundLabelId=-1, numClasses, topK, keepTopK,
                scoreThreshold, iouThreshold, isNormalized=True, clipBoxes=True, scoreBits=16, caffeSemantics=True,
                force_reference=False):
    if boxes.dim() == 3:
        boxes = boxes.unsqueeze(2)
    num, out_boxes, out_scores, cls, _ = per_class_nms(
        boxes, scores, topk=topK, keep_topk=keepTopK, score_threshold=scoreThreshold, iou_threshold=iouThreshold,
        background=backgroundLabelId, reorder=True, inter_offset=0.0 if isNormalized or not caffeSemantics else 1.0,
        area_offset=0.0 if isNormalized else 1.0, clip=clipBoxes, force_reference=force_reference)
    return num.unsqueeze(1), out_boxes, out_scores, cls.to(out_scores.dtype)
