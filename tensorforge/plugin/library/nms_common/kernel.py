"""Triton greedy NMS sweep: per segment of score-sorted boxes, which boxes survive suppression.

One program per segment (an image, or an image×class). The segment's M boxes (BLOCK_M ≥ M, a power of two,
at most 8192) are loaded once into registers; then for i = 0 … count-1, if box i is still alive, every later
box j of the same class (or any class when class_aware=0) with IoU(i, j) > thr (strict) or ≥ thr is dropped.
IoU follows the exporter's convention: optional corner reordering, +1 pixel offsets (Caffe semantics).

Work: O(count·M) IoU evaluations per segment, all in registers. Memory traffic: 16·M bytes of boxes and
4·M of classes read once, count·20 bytes of scalar re-reads, M bytes of keep flags written.
"""

import triton
import triton.language as tl


@triton.jit
def _corners(x1, y1, x2, y2, REORDER: tl.constexpr):
    if REORDER:
        return tl.minimum(x1, x2), tl.minimum(y1, y2), tl.maximum(x1, x2), tl.maximum(y1, y2)
    return x1, y1, x2, y2


@triton.jit
def nms_sweep_kernel(boxes_ptr, cls_ptr, count_ptr, keep_ptr, M, thr,
                     STRICT: tl.constexpr, REORDER: tl.constexpr, CLASS_AWARE: tl.constexpr,
                     INTER_OFF: tl.constexpr, AREA_OFF: tl.constexpr, BLOCK_M: tl.constexpr):
    seg = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_M)
    cnt = tl.load(count_ptr + seg)
    valid = offs < cnt
    base = boxes_ptr + seg * M * 4
    x1 = tl.load(base + offs * 4 + 0, mask=valid, other=0.0).to(tl.float32)
    y1 = tl.load(base + offs * 4 + 1, mask=valid, other=0.0).to(tl.float32)
    x2 = tl.load(base + offs * 4 + 2, mask=valid, other=0.0).to(tl.float32)
    y2 = tl.load(base + offs * 4 + 3, mask=valid, other=0.0).to(tl.float32)
    x1, y1, x2, y2 = _corners(x1, y1, x2, y2, REORDER)
    w = x2 - x1
    h = y2 - y1
    area = tl.where((w >= 0.0) & (h >= 0.0), (w + AREA_OFF) * (h + AREA_OFF), 0.0)
    cls = tl.load(cls_ptr + seg * M + offs, mask=valid, other=-1)
    keep = valid.to(tl.int32)
    for i in range(0, cnt):
        alive = tl.sum(tl.where(offs == i, keep, 0), axis=0)
        bx1 = tl.load(base + i * 4 + 0).to(tl.float32)
        by1 = tl.load(base + i * 4 + 1).to(tl.float32)
        bx2 = tl.load(base + i * 4 + 2).to(tl.float32)
        by2 = tl.load(base + i * 4 + 3).to(tl.float32)
        bx1, by1, bx2, by2 = _corners(bx1, by1, bx2, by2, REORDER)
        bw = bx2 - bx1
        bh = by2 - by1
        barea = tl.where((bw >= 0.0) & (bh >= 0.0), (bw + AREA_OFF) * (bh + AREA_OFF), 0.0)
        disjoint = (x1 > bx2) | (x2 < bx1) | (y1 > by2) | (y2 < by1)
        iw = tl.minimum(x2, bx2) - tl.maximum(x1, bx1) + INTER_OFF
        ih = tl.minimum(y2, by2) - tl.maximum(y1, by1) + INTER_OFF
        inter = tl.where(disjoint | (iw <= 0.0) | (ih <= 0.0), 0.0, iw * ih)
        union = area + barea - inter
        iou = tl.where(union > 0.0, inter / tl.where(union > 0.0, union, 1.0), 0.0)
        if STRICT:
            over = iou > thr
        else:
            over = iou >= thr
        if CLASS_AWARE:
            ci = tl.load(cls_ptr + seg * M + i)
            over = over & (cls == ci)
        drop = over & (offs > i) & (alive > 0)
        keep = tl.where(drop, 0, keep)
    tl.store(keep_ptr + seg * M + offs, keep.to(tl.int8), mask=offs < M)


def launch(boxes, classes, count, keep, thr: float, strict: bool, reorder: bool, class_aware: bool,
           inter_offset: float, area_offset: float) -> None:
    """boxes [S, M, 4] (contiguous), classes [S, M] int32, count [S] int32 → keep [S, M] int8."""
    S, M = boxes.shape[0], boxes.shape[1]
    if S == 0 or M == 0:
        return
    block = triton.next_power_of_2(M)
    warps = 4 if block <= 512 else 8 if block <= 2048 else 16
    nms_sweep_kernel[(S,)](boxes, classes, count, keep, M, float(thr), STRICT=bool(strict), REORDER=bool(reorder),
                           CLASS_AWARE=bool(class_aware), INTER_OFF=float(inter_offset), AREA_OFF=float(area_offset),
                           BLOCK_M=block, num_warps=warps)
