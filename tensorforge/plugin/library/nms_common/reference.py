"""Torch greedy NMS: the oracle for the Triton sweep, and the CPU path of every NMS plugin.

    keep = greedy_keep(boxes[S, M, 4], classes[S, M], count[S], iou_threshold, strict, reorder, class_aware,
                       inter_offset, area_offset)      # bool [S, M]

Boxes are sorted by descending score within each segment; entries at positions ≥ count are invalid. Box i
survives unless an earlier surviving box j (same class when class_aware) has IoU(j, i) > thr (strict) or ≥ thr.
IoU: corners optionally reordered (min/max), disjoint boxes → 0, intersection side + inter_offset, areas
(w + area_offset)(h + area_offset) for w, h ≥ 0 else 0, union ≤ 0 → 0. Memory: an [M, M] IoU matrix per segment.
"""

import torch

MAX_BOXES = 8192        # per segment: the Triton sweep keeps a segment in registers


def iou_matrix(b: torch.Tensor, reorder: bool, inter_offset: float, area_offset: float) -> torch.Tensor:
    b = b.float()
    x1, y1, x2, y2 = b.unbind(-1)
    if reorder:
        x1, x2 = torch.minimum(x1, x2), torch.maximum(x1, x2)
        y1, y2 = torch.minimum(y1, y2), torch.maximum(y1, y2)
    w, h = x2 - x1, y2 - y1
    area = torch.where((w >= 0) & (h >= 0), (w + area_offset) * (h + area_offset), torch.zeros_like(w))
    disjoint = ((x1[None, :] > x2[:, None]) | (x2[None, :] < x1[:, None]) |
                (y1[None, :] > y2[:, None]) | (y2[None, :] < y1[:, None]))
    iw = torch.minimum(x2[:, None], x2[None, :]) - torch.maximum(x1[:, None], x1[None, :]) + inter_offset
    ih = torch.minimum(y2[:, None], y2[None, :]) - torch.maximum(y1[:, None], y1[None, :]) + inter_offset
    inter = torch.where(disjoint | (iw <= 0) | (ih <= 0), torch.zeros_like(iw), iw * ih)
    union = area[:, None] + area[None, :] - inter
    return torch.where(union > 0, inter / torch.where(union > 0, union, torch.ones_like(union)),
                       torch.zeros_like(union))


def greedy_keep(boxes, classes, count, iou_threshold: float, strict: bool, reorder: bool, class_aware: bool,
                inter_offset: float = 0.0, area_offset: float = 0.0) -> torch.Tensor:
    S, M = boxes.shape[0], boxes.shape[1]
    keep = torch.zeros(S, M, dtype=torch.bool, device=boxes.device)
    for s in range(S):
        n = int(count[s])
        if n == 0:
            continue
        iou = iou_matrix(boxes[s, :n], reorder, inter_offset, area_offset)
        over = iou > iou_threshold if strict else iou >= iou_threshold
        if class_aware:
            over &= classes[s, :n, None] == classes[s, None, :n]
        over = torch.triu(over, diagonal=1)
        alive = torch.ones(n, dtype=torch.bool, device=boxes.device)
        for i in range(n):
            if alive[i]:
                alive &= ~over[i]
        keep[s, :n] = alive
    return keep
