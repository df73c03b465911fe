"""MMCV RoIAlign in torch (mmcv.ops.roi_align semantics, written from its documentation and formulas).

For roi r = (b, x1, y1, x2, y2) and output bin (ph, pw), with o = 0.5 if aligned else 0:
    start = (x1, y1)·spatial_scale − o, size = (x2 − x1, y2 − y1)·spatial_scale (at least 1 when not aligned),
    bin = size / (output_width, output_height), grid = sampling_ratio or ceil(size / output) per axis,
    samples at start + (p + (i + ½)/grid)·bin, each bilinearly interpolated (0 outside [−1, H]×[−1, W],
    coordinates clamped at 0 and at the last row/column);
    avg: mean over the grid·grid samples; max: their maximum.
Output [K, C, output_height, output_width]. Memory: gathers 4 corners per sample, vectorised over channels.
"""

import math

import torch


def _bilinear(feat: torch.Tensor, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """feat [C, H, W]; y, x [...] → [C, ...] with mmcv's border rules."""
    H, W = feat.shape[-2:]
    inside = (y >= -1.0) & (y <= H) & (x >= -1.0) & (x <= W)
    y, x = y.clamp(min=0), x.clamp(min=0)
    y0, x0 = y.floor().long().clamp(max=H - 1), x.floor().long().clamp(max=W - 1)
    y = torch.where(y0 >= H - 1, y0.to(y.dtype), y)
    x = torch.where(x0 >= W - 1, x0.to(x.dtype), x)
    y1, x1 = (y0 + 1).clamp(max=H - 1), (x0 + 1).clamp(max=W - 1)
    ly, lx = y - y0, x - x0
    hy, hx = 1 - ly, 1 - lx
    val = (hy * hx * feat[:, y0, x0] + hy * lx * feat[:, y0, x1]
           + ly * hx * feat[:, y1, x0] + ly * lx * feat[:, y1, x1])
    return val * inside


def roi_align(input, rois, *, output_height, output_width, spatial_scale=1.0, sampling_ratio=0, mode="avg",
              aligned=True):
    K, C = rois.shape[0], input.shape[1]
    out = torch.zeros(K, C, output_height, output_width, dtype=torch.float32, device=input.device)
    off = 0.5 if aligned else 0.0
    feat_all = input.float()
    for k in range(K):
        b, x1, y1, x2, y2 = rois[k].tolist()
        sx, sy = x1 * spatial_scale - off, y1 * spatial_scale - off
        w, h = (x2 - x1) * spatial_scale, (y2 - y1) * spatial_scale
        if not aligned:
            w, h = max(w, 1.0), max(h, 1.0)
        bw, bh = w / output_width, h / output_height
        gh = sampling_ratio if sampling_ratio > 0 else math.ceil(h / output_height)
        gw = sampling_ratio if sampling_ratio > 0 else math.ceil(w / output_width)
        if gh <= 0 or gw <= 0:
            continue
        dev = input.device
        ys = sy + (torch.arange(output_height, device=dev)[:, None] +
                   (torch.arange(gh, device=dev)[None, :] + 0.5) / gh) * bh          # [oh, gh]
        xs = sx + (torch.arange(output_width, device=dev)[:, None] +
                   (torch.arange(gw, device=dev)[None, :] + 0.5) / gw) * bw          # [ow, gw]
        Y = ys[:, :, None, None].expand(-1, -1, output_width, gw)
        X = xs[None, None, :, :].expand(output_height, gh, -1, -1)
        vals = _bilinear(feat_all[int(b)], Y, X)                                    # [C, oh, gh, ow, gw]
        if mode == "max":
            out[k] = vals.amax(dim=(2, 4))
        else:
            out[k] = vals.sum(dim=(2, 4)) / max(gh * gw, 1)
    return out.to(input.dtype)
