"""Shared NMS core for EfficientNMS_TRT, BatchedNMSDynamic_TRT and mmdeploy's TRTBatchedNMS (not a plugin).

`suppress(...)` → keep flags for score-sorted segments: the Triton sweep (kernel.py) on CUDA or under
TRITON_INTERPRET=1, the torch greedy loop (reference.py) otherwise. Score filtering, sorting, top-k and the
gather into the exporters' output layouts are torch ops in each plugin (fixed shapes, no host sync).
"""

import torch

from ...triton_util import use_triton
from .reference import MAX_BOXES, greedy_keep, iou_matrix


def suppress(boxes, classes, count, iou_threshold: float, strict: bool, reorder: bool, class_aware: bool,
             inter_offset: float = 0.0, area_offset: float = 0.0, force_reference: bool = False) -> torch.Tensor:
    """boxes [S, M, 4] sorted by score per segment; classes [S, M]; count [S] → keep [S, M] bool."""
    if use_triton(boxes) and not force_reference:
        from .kernel import launch
        keep = torch.empty(boxes.shape[0], boxes.shape[1], dtype=torch.int8, device=boxes.device)
        launch(boxes.contiguous(), classes.to(torch.int32).contiguous(), count.to(torch.int32).contiguous(), keep,
               iou_threshold, strict, reorder, class_aware, inter_offset, area_offset)
        return keep.bool()
    return greedy_keep(boxes, classes, count, iou_threshold, strict, reorder, class_aware, inter_offset, area_offset)


def take_first(keep: torch.Tensor, limit: int) -> tuple[torch.Tensor, torch.Tensor]:
    """For keep [S, M]: slot [S, M] (rank of each kept entry, or `limit` = discard) and the kept count per segment
    capped at `limit` — a gather plan with fixed shapes (no nonzero, so CUDA graphs can capture it)."""
    rank = torch.cumsum(keep.to(torch.int64), dim=1) - 1
    slot = torch.where(keep & (rank < limit), rank, torch.full_like(rank, limit))
    return slot, torch.clamp(keep.sum(dim=1), max=limit)


def scatter_rows(values: torch.Tensor, slot: torch.Tensor, limit: int, fill) -> torch.Tensor:
    """values [S, M, ...] → out [S, limit, ...]: values[s, m] goes to out[s, slot[s, m]] (slot == limit: dropped)."""
    S = values.shape[0]
    out = torch.full((S, limit + 1) + tuple(values.shape[2:]), fill, dtype=values.dtype, device=values.device)
    index = slot.view(S, -1, *([1] * (values.dim() - 2))).expand_as(values)
    out.scatter_(1, index, values)
    return out[:, :limit]


__all__ = ["MAX_BOXES", "greedy_keep", "iou_matrix", "scatter_rows", "suppress", "take_first"]
