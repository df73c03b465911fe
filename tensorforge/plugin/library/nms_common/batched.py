"""Per-class batched NMS (TensorRT's batchedNMSPlugin family, mmdeploy's TRTBatchedNMS), fixed shapes throughout.

    per_class_nms(boxes [B, N, 1|C, 4], scores [B, N, C], ...) -> count [B], boxes [B, K, 4], scores [B, K],
                                                                   classes [B, K], index [B, K]
1. Per image and class (background skipped): scores > score_threshold; the best min(topk, N) by score.
2. Greedy NMS per (image, class) segment with the exporter's IoU convention (`suppress`: Triton or torch).
3. Survivors of all classes sorted by score; the best K = keep_topk written; empty slots hold box 0, score 0,
   class −1, index −1 (index: the box's anchor n, or c·N + n for per-class boxes, as mmdeploy's kernel writes).
Memory traffic: one sort of C·N scores and one of C·topk survivors per image; boxes gathered once.
"""

import torch

from . import suppress


def per_class_nms(boxes, scores, *, topk: int, keep_topk: int, score_threshold: float, iou_threshold: float,
                  background: int, reorder: bool, inter_offset: float, area_offset: float, clip: bool,
                  force_reference: bool = False):
    B, N, C = scores.shape
    shared = boxes.shape[2] == 1
    M = max(1, min(topk, N))
    s = scores.permute(0, 2, 1).float()                                     # [B, C, N]
    ok = s > score_threshold
    if 0 <= background < C:
        ok[:, background] = False
    masked = torch.where(ok, s, torch.full_like(s, float("-inf")))
    idx = torch.sort(masked, dim=2, descending=True, stable=True).indices[:, :, :M]     # [B, C, M]
    top = torch.gather(masked, 2, idx)
    count = torch.isfinite(top).sum(dim=2).to(torch.int32)
    b_ix = torch.arange(B, device=boxes.device)[:, None, None]
    c_ix = torch.zeros_like(idx) if shared else torch.arange(C, device=boxes.device)[None, :, None].expand_as(idx)
    picked = boxes[b_ix, idx, c_ix]                                         # [B, C, M, 4]
    keep = suppress(picked.reshape(B * C, M, 4), torch.zeros(B * C, M, dtype=torch.int32, device=boxes.device),
                    count.reshape(-1), iou_threshold, strict=True, reorder=reorder, class_aware=False,
                    inter_offset=inter_offset, area_offset=area_offset, force_reference=force_reference)
    survivors = torch.where(keep.view(B, C, M), top, torch.full_like(top, float("-inf"))).reshape(B, C * M)
    K = min(keep_topk, C * M)
    order = torch.sort(survivors, dim=1, descending=True, stable=True).indices[:, :K]
    best = torch.gather(survivors, 1, order)
    valid = torch.isfinite(best)
    cls = order // M
    n = torch.gather(idx.reshape(B, C * M), 1, order)
    out_boxes = torch.gather(picked.reshape(B, C * M, 4), 1, order[..., None].expand(B, K, 4))
    if clip:
        out_boxes = out_boxes.clamp(0, 1)
    out_scores = torch.gather(scores.permute(0, 2, 1).reshape(B, C * N), 1, cls * N + n)
    index = n if shared else cls * N + n
    pad = keep_topk - K

    def fill(t, value):
        t = torch.where(valid.view(B, K, *([1] * (t.dim() - 2))), t, torch.full_like(t, value))
        if pad:
            t = torch.cat([t, torch.full((B, pad) + tuple(t.shape[2:]), value, dtype=t.dtype, device=t.device)], 1)
        return t
    return (valid.sum(dim=1).to(torch.int32), fill(out_boxes.to(boxes.dtype), 0), fill(out_scores.to(boxes.dtype), 0),
            fill(cls.to(torch.int32), -1), fill(index.to(torch.int32), -1))
