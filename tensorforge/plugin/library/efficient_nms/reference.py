"""EfficientNMS_TRT in torch: TensorRT's efficientNMSPlugin semantics, written from its documentation.

Per image: candidates = (anchor, class) pairs with score ≥ score_threshold (after sigmoid when score_activation)
and class ≠ background_class; the 4096 best are sorted by score; greedy NMS keeps a box unless a kept
higher-scoring box of the same class (any class when class_agnostic) overlaps it with IoU ≥ iou_threshold
(corners reordered so x1 ≤ x2, y1 ≤ y2); the first max_output_boxes kept boxes are written.
box_coding 0: [x1, y1, x2, y2]; 1: [xc, yc, w, h]. With anchors (third input) boxes are decoded first:
corners: box + anchor; center-size: (xc·aw + axc, yc·ah + ayc, aw·e^w, ah·e^h). Output boxes are corners.
Outputs: num_detections [B, 1] int32, detection_boxes [B, K, 4], detection_scores [B, K] (sigmoid applied when
score_activation), detection_classes [B, K] int32; unused slots are 0.
"""

import torch

from ..nms_common import scatter_rows, suppress, take_first

MAX_SELECTED = 4096      # TensorRT's numSelectedBoxes: NMS runs on the best 4096 candidates per image


def to_corners(b: torch.Tensor, box_coding: int) -> torch.Tensor:
    if box_coding == 0:
        return b
    xc, yc, w, h = b.unbind(-1)
    return torch.stack([xc - w / 2, yc - h / 2, xc + w / 2, yc + h / 2], dim=-1)


def decode(b: torch.Tensor, anchors: torch.Tensor, box_coding: int) -> torch.Tensor:
    """b [B, N, (C,) 4] raw predictions, anchors [1|B, N, 4] → decoded boxes in the same coding."""
    a = anchors if b.dim() == 3 else anchors.unsqueeze(2)
    if box_coding == 0:
        def order(t):
            x1, y1, x2, y2 = t.unbind(-1)
            return torch.stack([torch.minimum(x1, x2), torch.minimum(y1, y2), torch.maximum(x1, x2),
                                torch.maximum(y1, y2)], dim=-1)
        return order(b) + order(a)
    bx, by, bw, bh = b.unbind(-1)
    ax, ay, aw, ah = a.unbind(-1)
    return torch.stack([bx * aw + ax, by * ah + ay, aw * torch.exp(bw), ah * torch.exp(bh)], dim=-1)


def efficient_nms(boxes, scores, anchors=None, *, score_threshold, iou_threshold, max_output_boxes,
                  background_class=-1, score_activation=False, class_agnostic=False, box_coding=0,
                  force_reference=False):
    B, N, C = scores.shape
    s = scores.float().sigmoid() if score_activation else scores.float()
    cls_ids = torch.arange(C, device=scores.device).expand(B, N, C)
    ok = s >= score_threshold
    if 0 <= background_class < C:
        ok &= cls_ids != background_class
    flat = torch.where(ok, s, torch.full_like(s, float("-inf"))).reshape(B, N * C)
    M = min(MAX_SELECTED, N * C)
    order = torch.sort(flat, dim=1, descending=True, stable=True).indices[:, :M]
    top = torch.gather(flat, 1, order)
    count = torch.isfinite(top).sum(dim=1).to(torch.int32)
    anchor, cls = order // C, order % C
    if anchors is not None:
        boxes = decode(boxes, anchors, box_coding)
    per_class = boxes.dim() == 4 and boxes.shape[2] > 1
    b_idx = torch.arange(B, device=boxes.device)[:, None]
    picked = boxes[b_idx, anchor, cls] if per_class else (boxes[b_idx, anchor, 0] if boxes.dim() == 4
                                                          else boxes[b_idx, anchor])
    picked = to_corners(picked, box_coding)
    keep = suppress(picked, cls.to(torch.int32), count, iou_threshold, strict=False, reorder=True,
                    class_aware=not class_agnostic, force_reference=force_reference)
    slot, num = take_first(keep, max_output_boxes)
    raw = torch.gather(scores.reshape(B, N * C), 1, order)
    out_scores = raw.float().sigmoid().to(scores.dtype) if score_activation else raw
    return (num.to(torch.int32).unsqueeze(1),
            scatter_rows(picked.to(boxes.dtype), slot, max_output_boxes, 0),
            scatter_rows(out_scores, slot, max_output_boxes, 0),
            scatter_rows(cls.to(torch.int32), slot, max_output_boxes, 0))
