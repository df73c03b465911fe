"""Resize (ONNX Resize-19 semantics; the importer maps Resize-10/11/13/18 and Upsample-7/9 onto it).

Entry point: the `Resize` reference. It is separable — each resized axis is resampled on its own with a
small per-output-index table of source taps and weights — and hands the cases torch's upsample kernels
compute exactly (power-of-two nearest, linear half_pixel/align_corners) to those kernels in one pass.
"""

import math

import torch

from .nn_common import host_values, nn_op

_aten = torch.ops.aten
_UPSAMPLE = {1: (_aten.upsample_nearest1d, _aten.upsample_linear1d),        # (nearest, linear) per spatial rank
             2: (_aten.upsample_nearest2d, _aten.upsample_bilinear2d),
             3: (_aten.upsample_nearest3d, _aten.upsample_trilinear3d)}


def _f32(v: float) -> float:
    return torch.tensor(v, dtype=torch.float32).item()


def _plan(in_shape, roi, scales, sizes, axes, policy):
    """Per dim of x: output size, scale s, and (roi start, roi end)."""
    r = len(in_shape)
    axes = [a % r for a in axes] if axes else list(range(r))
    out, scale = list(in_shape), [1.0] * r
    if sizes is not None:
        if len(sizes) != len(axes):
            raise ValueError(f"Resize sizes has {len(sizes)} values for {len(axes)} axes")
        ratios = [int(sz) / in_shape[a] for a, sz in zip(axes, sizes)]
        if policy != "stretch":
            common = min(ratios) if policy == "not_larger" else max(ratios)
            ratios = [common] * len(axes)
            sizes = [int(common * in_shape[a] + 0.5) for a in axes]
        for a, sz, ratio in zip(axes, sizes, ratios):
            out[a], scale[a] = int(sz), ratio
    elif scales is not None:
        if len(scales) != len(axes):
            raise ValueError(f"Resize scales has {len(scales)} values for {len(axes)} axes")
        for a, s in zip(axes, scales):
            if s <= 0:
                raise ValueError(f"Resize scale {s} must be positive")
            scale[a] = float(s)
            out[a] = math.floor(_f32(float(in_shape[a]) * _f32(s)))
    else:
        raise ValueError("Resize needs scales or sizes")
    bounds = [(0.0, 1.0)] * r
    if roi is not None:
        k = len(axes)
        for i, a in enumerate(axes):
            bounds[a] = (float(roi[i]), float(roi[k + i]))
    return out, scale, bounds


def _source_coords(ctm, n_out, n_in, s, roi, device):
    y = torch.arange(n_out, dtype=torch.float32, device=device)
    s = _f32(s)
    if ctm in ("half_pixel", "pytorch_half_pixel"):
        x = (y + 0.5) / s - 0.5
        if ctm == "pytorch_half_pixel" and n_out == 1:
            x = torch.zeros_like(y)
    elif ctm == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / (s * n_in))
        x = offset + (y + 0.5) / s - 0.5
    elif ctm == "align_corners":
        x = y * ((n_in - 1) / (n_out - 1)) if n_out > 1 else torch.zeros_like(y)
    elif ctm == "asymmetric":
        x = y / s
    elif ctm == "tf_half_pixel_for_nn":
        x = (y + 0.5) / s
    elif ctm == "tf_crop_and_resize":
        start, end = roi
        if n_out > 1:
            x = start * (n_in - 1) + y * ((end - start) * (n_in - 1) / (n_out - 1))
        else:
            x = torch.full_like(y, 0.5 * (start + end) * (n_in - 1))
    else:
        raise ValueError(f"Resize coordinate_transformation_mode {ctm!r} is not supported")
    return x


def _nearest(x, rule):
    if rule == "round_prefer_floor":
        return torch.where(x - torch.floor(x) == 0.5, torch.floor(x), torch.round(x))
    if rule == "round_prefer_ceil":
        return torch.floor(x + 0.5)
    if rule == "floor":
        return torch.floor(x)
    if rule == "ceil":
        return torch.ceil(x)
    raise ValueError(f"Resize nearest_mode {rule!r} is not supported")


def _cubic_kernel(d, a):
    d = d.abs()
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return torch.where(d <= 1, near, torch.where(d < 2, far, torch.zeros_like(d)))


def _taps(x, n_in, s, mode, a, antialias, exclude_outside):
    """(index [out, K], weight [out, K]) of one axis; weights rows sum to 1."""
    stretch = min(s, 1.0) if antialias else 1.0
    support = 1.0 if mode == "linear" else 2.0
    first = math.floor(-support / stretch) + 1          # taps base+first .. base+(2·support − first) − 1
    offsets = torch.arange(first, int(2 * support) - first, device=x.device, dtype=torch.float32)
    base = torch.where(x == torch.floor(x), x - 1, torch.floor(x))     # ratio x − base ∈ (0, 1]
    index = base[:, None] + offsets[None, :]
    d = (index - x[:, None]) * stretch
    weight = torch.clamp(1 - d.abs(), min=0) if mode == "linear" else _cubic_kernel(d, a)
    if exclude_outside:
        weight = torch.where((index < 0) | (index > n_in - 1), torch.zeros_like(weight), weight)
    if antialias or exclude_outside:
        total = weight.sum(1, keepdim=True)
        weight = weight / torch.where(total == 0, torch.ones_like(total), total)
    return index.clamp(0, n_in - 1).long(), weight


def _resize_axis(t, axis, n_out, s, roi, mode, ctm, nearest_mode, a, antialias, exclude_outside, extrapolation):
    n_in = t.shape[axis]
    x = _source_coords(ctm, n_out, n_in, s, roi, t.device)
    if mode == "nearest":
        out = t.index_select(axis, _nearest(x, nearest_mode).clamp(0, n_in - 1).long())
    else:
        index, weight = _taps(x, n_in, s, mode, a, antialias, exclude_outside)
        k = index.shape[1]
        g = t.index_select(axis, index.reshape(-1)).reshape(t.shape[:axis] + (n_out, k) + t.shape[axis + 1:])
        w = weight.to(t.dtype).reshape((n_out, k) + (1,) * (t.dim() - axis - 1))
        out = (g * w).sum(axis + 1)
    if ctm == "tf_crop_and_resize":
        outside = ((x < 0) | (x > n_in - 1)).reshape((n_out,) + (1,) * (t.dim() - axis - 1))
        out = torch.where(outside, torch.full((), extrapolation, dtype=out.dtype, device=out.device), out)
    return out


def _fast_path(x, out, scale, mode, ctm, nearest_mode, antialias, resized):
    """One torch upsample kernel when it computes exactly the ONNX result, else None. torch maps output index
    y to (y + ½)/s − ½ (align_corners=False, clamped at 0 — the same as edge taps), y·(in − 1)/(out − 1)
    (align_corners=True) or ⌊y·(1/s)⌋ (nearest; exact only when 1/s is, so only for powers of two)."""
    nd = x.dim() - 2
    if nd not in _UPSAMPLE or any(d < 2 for d in resized) or antialias:
        return None
    spatial, sizes = [scale[d] for d in range(2, x.dim())], out[2:]
    if mode == "nearest" and ctm == "asymmetric" and nearest_mode == "floor" and all(
            s >= 1 and float(s).is_integer() and int(s) & (int(s) - 1) == 0 and o == i * int(s)
            for s, o, i in zip(spatial, sizes, x.shape[2:])):
        return _UPSAMPLE[nd][0](x, sizes, *spatial)
    if mode == "linear" and ctm == "align_corners":
        return _UPSAMPLE[nd][1](x, sizes, True, *[None] * nd)
    if mode == "linear" and ctm in ("half_pixel", "pytorch_half_pixel") and all(o > 1 for o in sizes):
        return _UPSAMPLE[nd][1](x, sizes, False, *spatial)
    return None


@nn_op("Resize", value_inputs=(1, 2, 3))
def resize(x, roi=None, scales=None, sizes=None, *, antialias=0, axes=None, coordinate_transformation_mode="half_pixel",
           cubic_coeff_a=-0.75, exclude_outside=0, extrapolation_value=0.0, keep_aspect_ratio_policy="stretch",
           mode="nearest", nearest_mode="round_prefer_floor"):
    """Separable resampling. For output index y along a resized axis the source coordinate x is (float32,
    as onnxruntime computes it):

        half_pixel           x = (y + ½)/s − ½              asymmetric     x = y/s
        pytorch_half_pixel   as half_pixel, 0 if out = 1    align_corners  x = y·(in − 1)/(out − 1), 0 if out = 1
        half_pixel_symmetric x = in/2·(1 − out/(s·in)) + (y + ½)/s − ½
        tf_half_pixel_for_nn x = (y + ½)/s                  (Resize-11/13 only)
        tf_crop_and_resize   x = start·(in − 1) + y·(end − start)·(in − 1)/(out − 1); outside [0, in − 1] the
                             output is `extrapolation_value`

    where s = scales[axis] (or out/in when `sizes` is given, or the common ratio under keep_aspect_ratio_policy).
    Then `nearest` picks one tap (nearest_mode: round_prefer_floor / round_prefer_ceil / floor / ceil), `linear`
    two taps with weights (1 − r, r), `cubic` four taps with Keys' kernel (coefficient a = cubic_coeff_a);
    antialias stretches linear/cubic kernels by 1/s when downscaling. Taps outside the input read the edge
    value, or get weight 0 with the rest renormalised (exclude_outside=1).

    Traffic: power-of-two nearest (asymmetric/floor) and (bi/tri)linear half_pixel/align_corners run torch's
    upsample kernels (read x, write y once); the general path reads K taps and writes one value per output
    element, once per resized axis. roi/scales/sizes are small host values (an empty tensor counts as absent).
    """
    if mode not in ("nearest", "linear", "cubic"):
        raise ValueError(f"Resize mode {mode!r} is not nearest, linear or cubic")
    if mode != "nearest" and not x.dtype.is_floating_point:
        raise ValueError(f"Resize mode {mode!r} on {x.dtype} is not supported (nearest is)")
    roi_v, scales_v = host_values(roi, "Resize roi"), host_values(scales, "Resize scales")
    sizes_v = host_values(sizes, "Resize sizes")
    out, scale, bounds = _plan(list(x.shape), roi_v, scales_v, sizes_v, axes, keep_aspect_ratio_policy)
    resized = [d for d in range(x.dim()) if out[d] != x.shape[d] or scale[d] != 1.0 or bounds[d] != (0.0, 1.0)]
    if not resized:
        return x
    if mode != "cubic" and coordinate_transformation_mode != "tf_crop_and_resize":
        y = _fast_path(x, out, scale, mode, coordinate_transformation_mode, nearest_mode, antialias, resized)
        if y is not None:
            return y
    y = x
    for d in resized:
        y = _resize_axis(y, d, out[d], scale[d], bounds[d], mode, coordinate_transformation_mode, nearest_mode,
                         cubic_coeff_a, antialias, exclude_outside, extrapolation_value)
    return y
