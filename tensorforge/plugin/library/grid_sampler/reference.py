"""grid_sampler (mmcv / mmdeploy export of torch.nn.functional.grid_sample) in torch.

out[n, c, h, w] = input[n, c] sampled at grid[n, h, w] = (x, y) ∈ [−1, 1]², unnormalised as
(x + 1)/2·(W − 1) when align_corners else ((x + 1)·W − 1)/2; padding_mode 0 zeros / 1 border / 2 reflection;
interpolation_mode 0 bilinear / 1 nearest (torch's enum values, which the exporter writes as ints).
"""

import torch

MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
PADDING = {0: "zeros", 1: "border", 2: "reflection"}


def grid_sampler(input, grid, *, interpolation_mode=0, padding_mode=0, align_corners=False):
    return torch.nn.functional.grid_sample(input, grid.to(input.dtype), mode=MODES[interpolation_mode],
                                           padding_mode=PADDING[padding_mode], align_corners=bool(align_corners))
