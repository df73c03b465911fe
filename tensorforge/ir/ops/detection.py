"""Detection ops: NonMaxSuppression (data-dependent output), RoiAlign, MaxRoiPool.

NonMaxSuppression: per (batch, class), boxes with score > score_threshold in descending score order (ties:
lower index first) are kept greedily unless their IoU with a kept box exceeds iou_threshold, at most
max_output_boxes_per_class of them. Output (selected, 3) rows [batch, class, box]: the count is known only
at run time, so shape inference returns a placeholder (ir/dynamic.py). The IoU matrix of each class is
computed at once (N² small reads); the greedy pass is sequential.
RoiAlign: each output cell averages (or takes ONNX's max-of-corner-products over) a grid of bilinear
samples of the region's bin; reads 4 neighbours per sample. MaxRoiPool: max over each quantised bin.
"""

import math

import torch

from .. import dynamic
from ..opspec import op


def _corners(b: torch.Tensor, center_point_box: int):
    """(N, 4) → y_min, x_min, y_max, x_max."""
    if center_point_box:
        xc, yc, w, h = b.unbind(-1)
        return yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2
    y1, x1, y2, x2 = b.unbind(-1)
    return torch.minimum(y1, y2), torch.minimum(x1, x2), torch.maximum(y1, y2), torch.maximum(x1, x2)


def _iou_over(boxes: torch.Tensor, center_point_box: int, threshold: float) -> torch.Tensor:
    """(N, N) bool: IoU(i, j) > threshold, with ONNX's rules for empty intersections and degenerate boxes."""
    y0, x0, y1, x1 = _corners(boxes.double(), center_point_box)
    iw = torch.minimum(x1[:, None], x1[None]) - torch.maximum(x0[:, None], x0[None])
    ih = torch.minimum(y1[:, None], y1[None]) - torch.maximum(y0[:, None], y0[None])
    inter = iw * ih
    area = (x1 - x0) * (y1 - y0)
    union = area[:, None] + area[None] - inter
    ok = (iw > 0) & (ih > 0) & (inter > 0) & (area[:, None] > 0) & (area[None] > 0) & (union > 0)
    return ok & (inter / torch.where(ok, union, torch.ones_like(union)) > threshold)


def _nms_infer(boxes, scores, *rest, center_point_box=0):
    return dynamic.data_dependent((scores.shape[0] * scores.shape[1] * scores.shape[2], 3), torch.int64)


@op("NonMaxSuppression", attrs={"center_point_box": 0}, infer=_nms_infer)
def non_max_suppression(boxes, scores, max_output_boxes_per_class=None, iou_threshold=None, score_threshold=None,
                        *, center_point_box=0):
    limit = max(int(max_output_boxes_per_class.reshape(-1)[0]), 0) if (
        max_output_boxes_per_class is not None and max_output_boxes_per_class.numel()) else 0
    iou = float(iou_threshold.reshape(-1)[0]) if iou_threshold is not None and iou_threshold.numel() else 0.0
    thr = float(score_threshold.reshape(-1)[0]) if score_threshold is not None and score_threshold.numel() else None
    rows = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            order = torch.sort(s, descending=True, stable=True).indices
            if thr is not None:
                order = order[s[order] > thr]
            over = _iou_over(boxes[b], center_point_box, iou).cpu()
            kept: list[int] = []
            for i in order.tolist():
                if len(kept) >= limit:
                    break
                if not any(bool(over[i, k]) for k in kept):
                    kept.append(i)
            rows.extend((b, c, i) for i in kept)
    return torch.tensor(rows, dtype=torch.int64, device=boxes.device).reshape(-1, 3)


def _bilinear_terms(coord: torch.Tensor, size: int):
    """For sample coordinates: low/high indices, low/high weights and validity (ONNX/Caffe2 RoiAlign rules)."""
    valid = (coord >= -1.0) & (coord <= size)
    c = coord.clamp(min=0)
    low = c.floor().long()
    at_edge = low >= size - 1
    low = torch.where(at_edge, torch.full_like(low, size - 1), low)
    high = torch.where(at_edge, low, low + 1)
    c = torch.where(at_edge, low.to(c.dtype), c)
    frac = c - low.to(c.dtype)
    return low, high, 1 - frac, frac, valid


def _roi_infer(x, rois, *rest, output_height=1, output_width=1, pooled_shape=None, **_):
    oh, ow = pooled_shape if pooled_shape is not None else (output_height, output_width)
    return torch.empty(rois.shape[0], x.shape[1], oh, ow, dtype=x.dtype, device="meta")


@op("RoiAlign", attrs={"coordinate_transformation_mode": "half_pixel", "mode": "avg", "output_height": 1,
                       "output_width": 1, "sampling_ratio": 0, "spatial_scale": 1.0}, infer=_roi_infer)
def roi_align(x, rois, batch_indices, *, coordinate_transformation_mode="half_pixel", mode="avg",
              output_height=1, output_width=1, sampling_ratio=0, spatial_scale=1.0):
    """x (N, C, H, W), rois (R, 4) as [x1, y1, x2, y2] → (R, C, output_height, output_width)."""
    _, channels, height, width = x.shape
    half = coordinate_transformation_mode == "half_pixel"
    off = 0.5 if half else 0.0
    out = []
    for r in range(rois.shape[0]):
        x1, y1, x2, y2 = (float(v) * spatial_scale - off for v in rois[r].tolist())
        rw, rh = x2 - x1, y2 - y1
        if not half:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / output_height, rw / output_width
        gh = sampling_ratio if sampling_ratio > 0 else math.ceil(rh / output_height)
        gw = sampling_ratio if sampling_ratio > 0 else math.ceil(rw / output_width)
        count = max(gh * gw, 1)
        ys = y1 + (torch.arange(output_height, dtype=torch.float64).reshape(-1, 1) * bh
                   + (torch.arange(gh, dtype=torch.float64).reshape(1, -1) + 0.5) * bh / gh)   # (oh, gh)
        xs = x1 + (torch.arange(output_width, dtype=torch.float64).reshape(-1, 1) * bw
                   + (torch.arange(gw, dtype=torch.float64).reshape(1, -1) + 0.5) * bw / gw)   # (ow, gw)
        yl, yh, wyl, wyh, vy = (t.to(x.device) for t in _bilinear_terms(ys, height))
        xl, xh, wxl, wxh, vx = (t.to(x.device) for t in _bilinear_terms(xs, width))
        fm = x[int(batch_indices[r])].double()                                      # (C, H, W)
        valid = (vy[:, :, None, None] & vx[None, None]).double()                    # (oh, gh, ow, gw)

        def corner(yi, xi, wy, wx):
            w = wy[:, :, None, None] * wx[None, None] * valid
            return fm[:, yi[:, :, None, None], xi[None, None]] * w                  # (C, oh, gh, ow, gw)

        terms = [corner(yl, xl, wyl, wxl), corner(yl, xh, wyl, wxh), corner(yh, xl, wyh, wxl), corner(yh, xh, wyh, wxh)]
        if mode == "avg":
            out.append(sum(terms).sum(dim=(2, 4)) / count)
        elif mode == "max":
            out.append(torch.stack(terms).amax(dim=0).amax(dim=(2, 4)))
        else:
            raise ValueError(f"RoiAlign mode must be avg or max, got {mode!r}")
    if not out:
        return torch.zeros(0, channels, output_height, output_width, dtype=x.dtype, device=x.device)
    return torch.stack(out).to(x.dtype)


@op("MaxRoiPool", attrs={"pooled_shape": None, "spatial_scale": 1.0}, infer=_roi_infer)
def max_roi_pool(x, rois, *, pooled_shape=None, spatial_scale=1.0):
    """rois (R, 5) as [batch, x1, y1, x2, y2] → (R, C, ph, pw): max over each rounded, quantised bin (0 if empty)."""
    ph, pw = pooled_shape
    _, channels, height, width = x.shape
    out = torch.zeros(rois.shape[0], channels, ph, pw, dtype=x.dtype, device=x.device)
    for r, (b, x1, y1, x2, y2) in enumerate(rois.tolist()):
        sw, sh, ew, eh = (int(math.copysign(math.floor(abs(v * spatial_scale) + 0.5), v))   # C round()
                          for v in (x1, y1, x2, y2))
        bin_h, bin_w = max(eh - sh + 1, 1) / ph, max(ew - sw + 1, 1) / pw
        for i in range(ph):
            h0 = min(max(math.floor(i * bin_h) + sh, 0), height)
            h1 = min(max(math.ceil((i + 1) * bin_h) + sh, 0), height)
            for j in range(pw):
                w0 = min(max(math.floor(j * bin_w) + sw, 0), width)
                w1 = min(max(math.ceil((j + 1) * bin_w) + sw, 0), width)
                if h1 > h0 and w1 > w0:
                    out[r, :, i, j] = x[int(b), :, h0:h1, w0:w1].amax(dim=(1, 2))
    return out
