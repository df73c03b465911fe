"""NN ops without a family of their own: Softmax/LogSoftmax/Hardmax (along one axis), Dropout (inference),
Flatten, DepthToSpace/SpaceToDepth and GridSample. Resize lives in `resize.py`.

The softmax family uses opset-13 semantics (normalise along `axis`); the importer rewrites the older
flatten-to-2-D semantics onto it. Dropout at inference is the identity, and its mask is all True.
"""

import math

import torch
import torch.nn.functional as F

from .nn_common import nn_op


@nn_op("Softmax")
def softmax(x, *, axis=-1):
    """y = exp(x − max) / Σ exp(x − max) along `axis`. One fused kernel: read x, write y."""
    return torch.softmax(x, axis)


@nn_op("LogSoftmax")
def log_softmax(x, *, axis=-1):
    """y = x − max − log Σ exp(x − max) along `axis`. One fused kernel: read x, write y."""
    return torch.log_softmax(x, axis)


@nn_op("Hardmax")
def hardmax(x, *, axis=-1):
    """y = 1 at the first maximum along `axis`, 0 elsewhere. Read x, write y (plus an index per row)."""
    first_max = torch.argmax(x, dim=axis, keepdim=True)
    return torch.zeros_like(x).scatter_(axis, first_max, 1)


@nn_op("Dropout")
def dropout(x):
    """Inference Dropout: (y, mask) = (x, all True). The importer emits this only when the mask is used; the
    output aliases x (no traffic), the mask costs one bool write per element."""
    return x, torch.ones_like(x, dtype=torch.bool)


@nn_op("Flatten")
def flatten(x, *, axis=1):
    """Reshape to 2-D: (∏ dims[:axis], ∏ dims[axis:]); axis may be negative. A view: no traffic."""
    axis = axis % x.dim() if x.dim() and axis < 0 else axis
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


@nn_op("DepthToSpace")
def depth_to_space(x, *, blocksize, mode="DCR"):
    """(N, C·b², H, W) → (N, C, H·b, W·b). DCR reads the channel index as (bh, bw, c), CRD as (c, bh, bw):

        DCR: y[n, c, h·b + i, w·b + j] = x[n, (i·b + j)·C + c, h, w]
        CRD: y[n, c, h·b + i, w·b + j] = x[n, (c·b + i)·b + j, h, w]
    One permuted copy: read x, write y.
    """
    n, c, h, w = x.shape
    b = int(blocksize)
    if mode == "DCR":
        t = x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
    elif mode == "CRD":
        t = x.reshape(n, c // (b * b), b, b, h, w).permute(0, 1, 4, 2, 5, 3)
    else:
        raise ValueError(f"DepthToSpace mode {mode!r} is not DCR or CRD")
    return t.reshape(n, c // (b * b), h * b, w * b)


@nn_op("SpaceToDepth")
def space_to_depth(x, *, blocksize, mode="DCR"):
    """(N, C, H·b, W·b) → (N, C·b², H, W), the inverse of DepthToSpace with the same `mode`:

        DCR: y[n, (i·b + j)·C + c, h, w] = x[n, c, h·b + i, w·b + j]
        CRD: y[n, (c·b + i)·b + j, h, w] = x[n, c, h·b + i, w·b + j]
    One permuted copy: read x, write y.
    """
    n, c, hb, wb = x.shape
    b = int(blocksize)
    t = x.reshape(n, c, hb // b, b, wb // b, b)
    if mode == "DCR":
        t = t.permute(0, 3, 5, 1, 2, 4)
    elif mode == "CRD":
        t = t.permute(0, 1, 3, 5, 2, 4)
    else:
        raise ValueError(f"SpaceToDepth mode {mode!r} is not DCR or CRD")
    return t.reshape(n, c * b * b, hb // b, wb // b)


_GRID_MODES = {"linear": "bilinear", "nearest": "nearest", "cubic": "bicubic"}


@nn_op("GridSample")
def grid_sample(x, grid, *, mode="linear", padding_mode="zeros", align_corners=0):
    """y[n, c, p] = interpolate(x[n, c], unnormalise(grid[n, p])) for 2-D (N, C, H, W) and, without cubic,
    3-D (N, C, D, H, W) inputs. grid holds (x, y[, z]) in [−1, 1]: −1/1 are the centres of the corner
    pixels with align_corners=1, their outer edges otherwise. padding_mode zeros/border/reflection decides
    samples outside. Nearest rounds half to even. Traffic: read grid once and ≤ 4 (8) taps of x per output.
    """
    nd = x.dim() - 2
    if nd not in (2, 3) or (nd == 3 and mode == "cubic"):
        raise ValueError(f"GridSample mode {mode!r} over {nd} spatial dims is not supported "
                         "(2-D in every mode and 3-D linear/nearest are)")
    if mode not in _GRID_MODES:
        raise ValueError(f"GridSample mode {mode!r} is not linear, nearest or cubic")
    return F.grid_sample(x, grid.to(x.dtype), _GRID_MODES[mode], padding_mode, bool(align_corners))
