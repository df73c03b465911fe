"""Normalisation ops: BatchNormalization (inference), Instance/Layer/Group normalisation, LpNormalization,
MeanVarianceNormalization and LRN, on x of shape (N, C, D1..Dk) unless noted.

Statistics follow ONNX: population variance (divide by the count, not count − 1), ε inside the square root
(except MeanVarianceNormalization, whose ONNX definition adds 1e-9 to the standard deviation). Reductions
in float16/bfloat16 accumulate in float32 (torch's kernels do), which is what stash_type=1 asks for.
Each op reads x twice at most (statistics, then normalise) and writes y once.
"""

import torch
import torch.nn.functional as F

from .nn_common import nn_op


def _channel_view(t, x):
    """A per-channel vector (C,) shaped to broadcast against x (N, C, D1..Dk)."""
    return t.to(x.dtype).reshape([1, -1] + [1] * (x.dim() - 2))


@nn_op("BatchNormalization")
def batch_normalization(x, scale, bias, mean, var, *, epsilon=1e-5):
    """y = (x − mean[c]) / √(var[c] + ε) · scale[c] + bias[c]   (inference form: stored statistics).

    Parameters are (C,) — or (C, D1..Dk) for BatchNormalization-7 with spatial=0, which normalises per
    activation and broadcasts against x directly. Traffic: read x, write y (parameters are C-sized).
    """
    params = [t.to(x.dtype) if t.dtype != x.dtype else t for t in (scale, bias, mean, var)]
    if scale.dim() <= 1:
        return F.batch_norm(x, params[2], params[3], params[0], params[1], False, 0.0, epsilon)
    scale, bias, mean, var = params
    return (x - mean) * (scale / torch.sqrt(var + epsilon)) + bias


@nn_op("InstanceNormalization")
def instance_normalization(x, scale, bias, *, epsilon=1e-5):
    """y[n, c] = (x[n, c] − μ[n, c]) / √(σ²[n, c] + ε) · scale[c] + bias[c], statistics over D1..Dk.

    Traffic: read x twice (statistics, normalise), write y.
    """
    return F.instance_norm(x, weight=scale.to(x.dtype), bias=bias.to(x.dtype), eps=epsilon)


@nn_op("LayerNormalization")
def layer_normalization(x, scale, bias=None, *, axis=-1, epsilon=1e-5, stash_type=1):
    """Y = (x − μ) · InvStdDev · scale + bias, with μ and σ² over dims axis..r−1, InvStdDev = 1/√(σ² + ε).

    Returns (Y, Mean, InvStdDev); Mean and InvStdDev keep x's rank with size-1 normalised dims and are
    float32 when stash_type=1. A layer that declares only Y uses only the first. One fused torch kernel
    (native_layer_norm): read x, write Y (+ the tiny statistics).
    """
    axis = axis % x.dim()
    norm_shape = list(x.shape[axis:])
    weight = scale.to(x.dtype).expand(norm_shape) if list(scale.shape) != norm_shape else scale.to(x.dtype)
    if bias is not None:
        bias = bias.to(x.dtype).expand(norm_shape) if list(bias.shape) != norm_shape else bias.to(x.dtype)
    y, mean, rstd = torch.native_layer_norm(x, norm_shape, weight, bias, epsilon)
    stats_shape = list(x.shape[:axis]) + [1] * len(norm_shape)
    stat_dtype = torch.float32 if stash_type == 1 and x.dtype != torch.float64 else x.dtype
    return y, mean.reshape(stats_shape).to(stat_dtype), rstd.reshape(stats_shape).to(stat_dtype)


@nn_op("GroupNormalization")
def group_normalization(x, scale, bias, *, num_groups, epsilon=1e-5, stash_type=1):
    """y = (x − μ[n, g]) / √(σ²[n, g] + ε) · scale[c] + bias[c], statistics over the C/G channels of group g
    and all of D1..Dk.

    scale/bias are per channel (C,) as in GroupNormalization-21; a (G,) pair (the deprecated version 18,
    one value per group) is repeated over each group's channels — the two readings agree when C = G.
    Traffic: read x twice, write y.
    """
    channels = x.shape[1]
    if scale.numel() == num_groups and channels != num_groups:
        scale = scale.repeat_interleave(channels // num_groups)
        bias = bias.repeat_interleave(channels // num_groups)
    return F.group_norm(x, int(num_groups), scale.to(x.dtype), bias.to(x.dtype), epsilon)


@nn_op("LpNormalization")
def lp_normalization(x, *, axis=-1, p=2):
    """y = x / ‖x‖_p along `axis` (p ∈ {1, 2}); a zero norm gives y = 0. Traffic: read x twice, write y."""
    norm = torch.linalg.vector_norm(x, ord=p, dim=axis, keepdim=True)
    return x / norm.masked_fill(norm == 0, 1)


@nn_op("MeanVarianceNormalization")
def mean_variance_normalization(x, *, axes=(0, 2, 3)):
    """y = (x − E[x]) / (√(E[x²] − E[x]²) + 1e-9), expectations over `axes`. Traffic: read x twice, write y."""
    dims = [a % x.dim() for a in axes]
    var, mean = torch.var_mean(x, dim=dims, unbiased=False, keepdim=True)
    return (x - mean) / (torch.sqrt(var) + 1e-9)


@nn_op("LRN")
def lrn(x, *, size, alpha=1e-4, beta=0.75, bias=1.0):
    """Local response normalisation across channels:

        y[n, c] = x[n, c] / (bias + α/size · Σ_{i = c − ⌊(size−1)/2⌋}^{c + ⌈(size−1)/2⌉} x[n, i]²)^β

    (channels outside 0..C−1 contribute 0). For even sizes the window reaches one channel further forward
    than back — the opposite of torch's local_response_norm, so the window sum is computed here as a
    (size × 1) average pool over the zero-padded squared channels. Traffic: read x twice, write y.
    """
    n, c = x.shape[:2]
    sq = (x * x).reshape(n, 1, c, -1)
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    window_mean = F.avg_pool2d(F.pad(sq, (0, 0, before, after)), (size, 1), stride=1)
    return x / (bias + alpha * window_mean.reshape(x.shape)).pow(beta)
