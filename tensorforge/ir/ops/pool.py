"""Pooling ops over (N, C, D1..Dk): MaxPool (+ Indices), AveragePool, LpPool and their Global forms.

Window placement follows ONNX (`nn_common.window_geometry`): explicit pads, auto_pad SAME_UPPER/SAME_LOWER/
VALID, dilations and ceil_mode — with ceil_mode a window that would start inside the end padding is dropped,
and the overhang of the last window is never counted as padding. Cases torch's pooling expresses exactly
(symmetric pads ≤ k/2, no dilation for the averages) call it directly; the rest pad explicitly first.
Every pool reads x once and writes y once (plus one padded copy of x on the explicit path).
"""

import math

import torch
import torch.nn.functional as F

from .nn_common import nn_op, per_dim, torch_pad_arg, window_geometry

_MAX = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVG = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}
_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def _spatial_rank(x, kernel_shape, what):
    nd = x.dim() - 2
    if nd not in _MAX or len(kernel_shape) != nd:
        raise ValueError(f"{what} over {nd} spatial dims with a {len(kernel_shape)}-D kernel is not supported "
                         "(1-D, 2-D and 3-D pools are)")
    return nd


def _torch_pads_ok(begin, end, kernel):
    """torch's pools accept only symmetric pads of at most half the kernel."""
    return begin == end and all(b <= k // 2 for b, k in zip(begin, kernel))


def _window_sum(x, kernel, strides, dilations, pad_begin, pad_end):
    """S[p] = Σ_q x_padded[p·s + q·d] with zero padding: a depthwise convolution with a ones kernel."""
    nd = len(kernel)
    n, c = x.shape[:2]
    xp = F.pad(x, torch_pad_arg(pad_begin, pad_end)) if any(pad_begin) or any(pad_end) else x
    ones = torch.ones([1, 1] + list(kernel), dtype=x.dtype, device=x.device)
    y = _CONV[nd](xp.reshape([n * c, 1] + list(xp.shape[2:])), ones, None, strides, 0, dilations)
    return y.reshape([n, c] + list(y.shape[2:]))


def _max_pool(x, auto_pad, ceil_mode, dilations, kernel_shape, pads, strides, with_indices, storage_order=0):
    nd = _spatial_rank(x, kernel_shape, "MaxPool")
    kernel = [int(k) for k in kernel_shape]
    strides, dilations = per_dim(strides, nd, 1), per_dim(dilations, nd, 1)
    in_sizes = list(x.shape[2:])
    _, begin, end, extra = window_geometry(in_sizes, kernel, strides, dilations, pads, auto_pad, ceil_mode)
    work = x if x.dtype.is_floating_point else x.to(torch.float32)    # int8/uint8: exact in float32
    if not with_indices and _torch_pads_ok(begin, end, kernel):
        y = _MAX[nd](work, kernel, strides, begin, dilations, bool(ceil_mode))
        return y.to(x.dtype)
    padded = F.pad(work, torch_pad_arg(begin, [e + x_ for e, x_ in zip(end, extra)]), value=-math.inf)
    y, flat = _MAX[nd](padded, kernel, strides, 0, dilations, False, return_indices=True)
    y = y.to(x.dtype)
    if not with_indices:
        return y
    # index into the padded plane → coordinates in the unpadded input → ONNX's flat index over all of x
    coords, rest = [], flat
    for size in reversed(padded.shape[2:]):
        coords.append(rest % size)
        rest = rest // size
    coords = [c - b for c, b in zip(reversed(coords), begin)]
    order = range(nd) if not storage_order else reversed(range(nd))
    index = torch.zeros_like(flat)
    for d in order:
        index = index * in_sizes[d] + coords[d]
    plane = math.prod(in_sizes)
    n, c = x.shape[:2]
    base = torch.arange(n * c, device=x.device, dtype=torch.int64).reshape([n, c] + [1] * nd) * plane
    return y, index + base


@nn_op("MaxPool")
def max_pool(x, *, kernel_shape, auto_pad="NOTSET", ceil_mode=0, dilations=None, pads=None, storage_order=0,
             strides=None):
    """y[n, c, p] = max_q x[n, c, p·s + q·d − pad_begin]  (padding reads as −∞).

    Symmetric pads ≤ k/2 go straight to torch's max pool (same ceil_mode rule as ONNX); other pads cost one
    −∞-padded copy of x. Traffic: read x, write y.
    """
    return _max_pool(x, auto_pad, ceil_mode, dilations, kernel_shape, pads, strides, False)


@nn_op("MaxPoolWithIndices")
def max_pool_with_indices(x, *, kernel_shape, auto_pad="NOTSET", ceil_mode=0, dilations=None, pads=None,
                          storage_order=0, strides=None):
    """MaxPool plus ONNX's second output: the int64 flat index of each maximum over the whole of x,
    ((n·C + c)·D1 + d1)·D2 + d2 … (storage_order 0, row-major) or with the spatial dims reversed
    (storage_order 1, column-major within each plane); padding never appears in an index.
    Extra traffic: the int64 index tensor, written once.
    """
    return _max_pool(x, auto_pad, ceil_mode, dilations, kernel_shape, pads, strides, True, storage_order)


@nn_op("AveragePool")
def average_pool(x, *, kernel_shape, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0, dilations=None,
                 pads=None, strides=None):
    """y[n, c, p] = Σ_q x_pad[n, c, p·s + q·d] / count(p)

    count(p) = number of window taps inside x (count_include_pad=0), or inside x plus the explicit pads
    (count_include_pad=1); the ceil_mode overhang beyond the end pad is never counted. Without dilation
    and with symmetric pads ≤ k/2 this is torch's avg_pool; otherwise a windowed sum of x and of a ones
    mask (a depthwise ones-kernel convolution) divided elementwise. Traffic: read x, write y.
    """
    nd = _spatial_rank(x, kernel_shape, "AveragePool")
    kernel = [int(k) for k in kernel_shape]
    strides, dilations = per_dim(strides, nd, 1), per_dim(dilations, nd, 1)
    in_sizes = list(x.shape[2:])
    _, begin, end, extra = window_geometry(in_sizes, kernel, strides, dilations, pads, auto_pad, ceil_mode)
    if all(d == 1 for d in dilations) and _torch_pads_ok(begin, end, kernel):
        return _AVG[nd](x, kernel, strides, begin, bool(ceil_mode), bool(count_include_pad))
    full_end = [e + x_ for e, x_ in zip(end, extra)]
    total = _window_sum(x, kernel, strides, dilations, begin, full_end)
    if count_include_pad:
        mask = torch.ones([1, 1] + [s + b + e for s, b, e in zip(in_sizes, begin, end)], dtype=x.dtype, device=x.device)
        count = _window_sum(mask, kernel, strides, dilations, [0] * nd, extra)
    else:
        mask = torch.ones([1, 1] + in_sizes, dtype=x.dtype, device=x.device)
        count = _window_sum(mask, kernel, strides, dilations, begin, full_end)
    return total / count


@nn_op("LpPool")
def lp_pool(x, *, kernel_shape, auto_pad="NOTSET", ceil_mode=0, dilations=None, p=2, pads=None, strides=None):
    """y[n, c, p] = (Σ_q |x_pad[n, c, p·s + q·d]|^p)^(1/p), zero padding. Traffic: read x, write y."""
    nd = _spatial_rank(x, kernel_shape, "LpPool")
    kernel = [int(k) for k in kernel_shape]
    strides, dilations = per_dim(strides, nd, 1), per_dim(dilations, nd, 1)
    _, begin, end, extra = window_geometry(list(x.shape[2:]), kernel, strides, dilations, pads, auto_pad, ceil_mode)
    total = _window_sum(x.abs().pow(p), kernel, strides, dilations, begin, [e + x_ for e, x_ in zip(end, extra)])
    return total.pow(1.0 / p)


def _spatial(x):
    return tuple(range(2, x.dim()))


@nn_op("GlobalAveragePool")
def global_average_pool(x):
    """y[n, c, 1, …] = mean over all spatial positions of x[n, c]. Traffic: read x, write N·C values."""
    return x.mean(dim=_spatial(x), keepdim=True) if x.dim() > 2 else x.clone()


@nn_op("GlobalMaxPool")
def global_max_pool(x):
    """y[n, c, 1, …] = max over all spatial positions of x[n, c]. Traffic: read x, write N·C values."""
    return x.amax(dim=_spatial(x), keepdim=True) if x.dim() > 2 else x.clone()


@nn_op("GlobalLpPool")
def global_lp_pool(x, *, p=2):
    """y[n, c, 1, …] = (Σ over spatial positions |x[n, c]|^p)^(1/p). Traffic: read x, write N·C values."""
    if x.dim() <= 2:
        return x.abs()
    return torch.linalg.vector_norm(x, ord=p, dim=_spatial(x), keepdim=True)
