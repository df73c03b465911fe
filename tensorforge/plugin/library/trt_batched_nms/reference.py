"""mmdeploy's TRTBatchedNMS in torch, from mmdeploy's TensorRT op documentation and public plugin source.

As BatchedNMSDynamic_TRT (per class: score > score_threshold, best topk, greedy NMS with IoU > iou_threshold;
survivors merged, best keep_topk), with mmdeploy's conventions: topk ≤ 0 or > N means N; IoU on the boxes as
given (no corner reordering, no +1 offsets whatever is_normalized says); clip_boxes clamps to [0, 1].
Outputs: dets [B, K, 5] = (x1, y1, x2, y2, score), labels [B, K] int32 (−1 empty), and with return_index,
index [B, K] int32 (anchor n, or c·N + n for per-class boxes; −1 empty). Empty dets are all 0.
"""

import torch

from ..nms_common.batched import per_class_nms


def trt_batched_nms(boxes, scores, *, background_label_id=-1, num_classes, topk, keep_topk, score_threshold,
                    iou_threshold, is_normalized=True, clip_boxes=True, return_index=False, force_reference=False):
    N = scores.shape[1]
    effective = topk if 0 < topk <= N else N
    num, out_boxes, out_scores, labels, index = per_class_nms(
        boxes, scores, topk=effective, keep_topk=keep_topk, score_threshold=score_threshold,
        iou_threshold=iou_threshold, background=background_label_id, reorder=False, inter_offset=0.0,
        area_offset=0.0, clip=clip_boxes, force_reference=force_reference)
    dets = torch.cat([out_boxes, out_scores.unsqueeze(-1)], dim=-1)
    return dets, labels, index
