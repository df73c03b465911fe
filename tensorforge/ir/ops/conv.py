"""Convolution ops: Conv and ConvTranspose over 1-D, 2-D and 3-D spatial inputs (N, C, D1, ..., Dk).

Entry points: the `Conv` and `ConvTranspose` references, which resolve ONNX padding rules (explicit pads,
auto_pad SAME_UPPER/SAME_LOWER/VALID, output_shape) to explicit pads with `nn_common.window_geometry`, then
call torch's convolutions (cuDNN / oneDNN underneath).
"""

import torch.nn.functional as F

from .nn_common import nn_op, per_dim, torch_pad_arg, window_geometry

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def pointwise_conv_reason(attrs: dict, w_shape: tuple[int, ...] | None = None) -> str | None:
    """Why a Conv/FusedConv with these attributes (and weights of shape `w_shape`, when known) is not a 1×1,
    stride-1, unpadded, ungrouped 2-D convolution — the GEMM Y (N·H·W, O) = X (N·H·W, C)·Wᵀ on channels-last
    rows — or None when it is. Shared by the fusion rules that need that GEMM and the tactics that run it."""
    if int(attrs.get("group", 1) or 1) != 1:
        return f"group {attrs.get('group')}: not a dense convolution"
    kernel = [int(k) for k in attrs.get("kernel_shape") or (w_shape[2:] if w_shape is not None else [])]
    if kernel and kernel != [1, 1]:
        return f"kernel {kernel}: not 1×1"
    if any(int(s) != 1 for s in attrs.get("strides") or []) or any(attrs.get("pads") or []) \
            or any(int(d) != 1 for d in attrs.get("dilations") or []) \
            or attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return "strided, padded or dilated"
    return None


@nn_op("Conv")
def conv(x, w, b=None, *, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None, pads=None, strides=None):
    """y[n, o, p] = b[o] + Σ_{c ∈ group(o), q} x[n, c, p·s + q·d − pad_begin] · w[o, c, q]

    x: (N, C, D1..Dk), w: (M, C/group, K1..Kk), k ∈ {1, 2, 3}. Padding follows `window_geometry`
    (SAME_UPPER puts the odd padding element at the end, SAME_LOWER at the beginning). Symmetric pads go
    to torch's convolution directly; asymmetric pads cost one padded copy of x first.
    Traffic: reads x (once per output channel tile in the library kernel), w, b; writes y.
    """
    nd = w.dim() - 2
    if nd not in _CONV:
        raise ValueError(f"Conv over {nd} spatial dims is not supported (1-D, 2-D and 3-D are)")
    kernel = list(w.shape[2:])
    strides, dilations = per_dim(strides, nd, 1), per_dim(dilations, nd, 1)
    _, begin, end, _ = window_geometry(list(x.shape[2:]), kernel, strides, dilations, pads, auto_pad)
    if begin == end:
        return _CONV[nd](x, w, b, strides, begin, dilations, group)
    return _CONV[nd](F.pad(x, torch_pad_arg(begin, end)), w, b, strides, 0, dilations, group)


def conv_transpose_pads(in_sizes, kernel, strides, dilations, pads, output_padding, output_shape, auto_pad):
    """ONNX ConvTranspose geometry per spatial dim: (pad_begin, pad_end, output_padding).

    full_i = s·(in − 1) + output_padding + (k − 1)·d + 1;  out = full − b − e.
    With `output_shape` (or auto_pad SAME_*, where out = in·s) the pads are derived:
    total = full − out; SAME_UPPER → b = total/2 (floor), e = rest; otherwise b = rest, e = total/2.
    """
    n = len(in_sizes)
    strides, dilations = per_dim(strides, n, 1), per_dim(dilations, n, 1)
    out_pad = per_dim(output_padding, n, 0)
    target = None
    if output_shape:
        target = [int(v) for v in output_shape][-n:]
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = [size * s for size, s in zip(in_sizes, strides)]
    if target is None:
        if auto_pad == "VALID" or not pads:
            return [0] * n, [0] * n, out_pad
        return [int(p) for p in pads[:n]], [int(p) for p in pads[n:]], out_pad
    begin, end = [], []
    for i in range(n):
        full = strides[i] * (in_sizes[i] - 1) + out_pad[i] + (int(kernel[i]) - 1) * dilations[i] + 1
        total = full - target[i]
        half = total // 2
        if auto_pad == "SAME_UPPER":
            begin.append(half), end.append(total - half)
        else:
            begin.append(total - half), end.append(half)
    return begin, end, out_pad


@nn_op("ConvTranspose")
def conv_transpose(x, w, b=None, *, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None,
                   output_padding=None, output_shape=None, pads=None, strides=None):
    """The adjoint of Conv: y[n, o, p·s + q·d − pad_begin] += x[n, c, p] · w[c, o, q], then + b[o].

    x: (N, C, D1..Dk), w: (C, M/group, K1..Kk). The full (unpadded) result has s·(in − 1) + (k − 1)·d + 1
    positions; `pads` crop it, `output_padding` appends positions at the end (only the bias reaches them).
    Symmetric pads with output_padding < max(s, d) go to torch directly; any other case computes the full
    result and crops/extends it with one extra copy. Traffic: reads x, w, b; writes y (plus the copy).
    """
    nd = w.dim() - 2
    if nd not in _CONV_T:
        raise ValueError(f"ConvTranspose over {nd} spatial dims is not supported (1-D, 2-D and 3-D are)")
    kernel = list(w.shape[2:])
    strides, dilations = per_dim(strides, nd, 1), per_dim(dilations, nd, 1)
    begin, end, out_pad = conv_transpose_pads(list(x.shape[2:]), kernel, strides, dilations, pads,
                                              output_padding, output_shape, auto_pad)
    direct = all(bb == e >= 0 for bb, e in zip(begin, end)) and all(
        0 <= op_ < max(s, d) for op_, s, d in zip(out_pad, strides, dilations))
    if direct:
        return _CONV_T[nd](x, w, b, strides, begin, out_pad, group, dilations)
    y = _CONV_T[nd](x, w, None, strides, 0, 0, group, dilations)
    y = F.pad(y, torch_pad_arg([-bb for bb in begin], [op_ - e for op_, e in zip(out_pad, end)]))
    if b is not None:
        y = y + b.reshape([1, -1] + [1] * nd)
    return y

