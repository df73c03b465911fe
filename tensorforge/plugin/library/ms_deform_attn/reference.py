"""Multi-scale deformable attention (Deformable DETR; mmcv's MultiScaleDeformableAttnFunction) in torch.

    out[b, q, h·D + d] = Σ_l Σ_p  A[b, q, h, l, p] · bilinear(V_l[b, :, h, d], loc[b, q, h, l, p])
where V_l is value[b, start_l : start_l + H_l·W_l, h, :] viewed as an H_l × W_l map and loc = (x, y) ∈ [0, 1]²
is sampled at pixel (x·W_l − ½, y·H_l − ½) with zero padding (grid_sample, align_corners=False).
Memory: 4 gathered D-vectors per (query, head, level, point); output bs·nq·heads·D.
"""

import torch.nn.functional as F


def ms_deform_attn(value, spatial_shapes, level_start_index, sampling_locations, attention_weights, *,
                   im2col_step=64):
    bs, _, heads, D = value.shape
    _, nq, _, L, P, _ = sampling_locations.shape
    shapes = [(int(h), int(w)) for h, w in spatial_shapes.tolist()]
    starts = [int(s) for s in level_start_index.tolist()]
    grids = 2 * sampling_locations.float() - 1
    out = 0
    for lvl, (H, W) in enumerate(shapes):
        v = value[:, starts[lvl]:starts[lvl] + H * W].float()                 # [bs, H·W, heads, D]
        v = v.permute(0, 2, 3, 1).reshape(bs * heads, D, H, W)
        g = grids[:, :, :, lvl].permute(0, 2, 1, 3, 4).reshape(bs * heads, nq, P, 2)
        sampled = F.grid_sample(v, g, mode="bilinear", padding_mode="zeros", align_corners=False)  # [bs·h, D, nq, P]
        w = attention_weights[:, :, :, lvl].float().permute(0, 2, 1, 3).reshape(bs * heads, 1, nq, P)
        out = out + (sampled * w).sum(-1)                                      # [bs·h, D, nq]
    out = out.reshape(bs, heads, D, nq).permute(0, 3, 1, 2).reshape(bs, nq, heads * D)
    return out.to(value.dtype)
