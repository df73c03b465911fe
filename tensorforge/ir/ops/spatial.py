"""Spatial re-arrangements: CenterCropPad, Col2Im, AffineGrid, DeformConv, MaxUnpool.

CenterCropPad: crop or zero-pad each listed axis to `shape`, centred (an odd surplus goes to the end).
Col2Im: the inverse of im2col — block columns (N, C·Πk, L) are summed back into the padded image.
AffineGrid: grid[n, …] = θₙ · (x, y[, z], 1) over a normalised [-1, 1] lattice (align_corners picks the
lattice: endpoints or cell centres). DeformConv: 2-D convolution whose taps sample x bilinearly at
offset positions (× mask). MaxUnpool: scatter x to the flat positions its MaxPool indices name.
Traffic: one read of the input (DeformConv: 4 reads per tap) and one write of the output.
"""

import torch

from ..opspec import op


@op("CenterCropPad", attrs={"axes": None}, value_inputs=(1,))
def center_crop_pad(x, shape, *, axes=None):
    rank = x.dim()
    axes = list(range(rank)) if axes is None else [a % rank for a in axes]
    target = list(x.shape)
    src = [slice(None)] * rank
    dst = [slice(None)] * rank
    for a, size in zip(axes, shape.tolist()):
        dim = x.shape[a]
        target[a] = size
        if size < dim:
            start = (dim - size) // 2
            src[a] = slice(start, start + size)
        elif size > dim:
            start = (size - dim) // 2
            dst[a] = slice(start, start + dim)
    out = torch.zeros(target, dtype=x.dtype, device=x.device)
    out[tuple(dst)] = x[tuple(src)]
    return out


@op("Col2Im", attrs={"dilations": None, "pads": None, "strides": None}, value_inputs=(1, 2))
def col2im(x, image_shape, block_shape, *, dilations=None, pads=None, strides=None):
    """x (N, C·Πk, L) → (N, C, *image_shape); overlapping taps add up."""
    image, block = image_shape.tolist(), block_shape.tolist()
    d = len(image)
    dil, st = dilations or [1] * d, strides or [1] * d
    pad = pads or [0] * (2 * d)
    padded = [image[i] + pad[i] + pad[i + d] for i in range(d)]
    counts = [(padded[i] - dil[i] * (block[i] - 1) - 1) // st[i] + 1 for i in range(d)]
    n = x.shape[0]
    kvol = 1
    for k in block:
        kvol *= k
    cols = x.reshape(n, -1, kvol, x.shape[-1])                       # (N, C, Πk, L)
    kk = torch.stack(torch.meshgrid(*[torch.arange(k) for k in block], indexing="ij")).reshape(d, -1)  # (d, Πk)
    ll = torch.stack(torch.meshgrid(*[torch.arange(c) for c in counts], indexing="ij")).reshape(d, -1)  # (d, L)
    flat = torch.zeros(kvol, ll.shape[1], dtype=torch.int64)
    for i in range(d):
        pos = ll[i].unsqueeze(0) * st[i] + kk[i].unsqueeze(1) * dil[i]
        flat = flat * padded[i] + pos
    total = 1
    for p in padded:
        total *= p
    out = torch.zeros(n, cols.shape[1], total, dtype=x.dtype, device=x.device)
    index = flat.reshape(-1).to(x.device).expand(n, cols.shape[1], -1)
    out.scatter_add_(2, index, cols.reshape(n, cols.shape[1], -1))
    out = out.reshape(n, cols.shape[1], *padded)
    for i in range(d):
        out = out.narrow(2 + i, pad[i], image[i])
    return out


def _lattice(size: int, align_corners: int) -> torch.Tensor:
    i = torch.arange(size, dtype=torch.float64)
    if align_corners:
        return -1 + 2 * i / (size - 1) if size > 1 else torch.zeros(1, dtype=torch.float64)
    return (2 * i + 1) / size - 1


@op("AffineGrid", attrs={"align_corners": 0}, value_inputs=(1,))
def affine_grid(theta, size, *, align_corners=0):
    """theta (N, 2, 3) with size (N, C, H, W) → (N, H, W, 2); (N, 3, 4) with (N, C, D, H, W) → (N, D, H, W, 3)."""
    dims = size.tolist()[2:]
    axes = [_lattice(s, align_corners) for s in dims]             # D/H/W order
    mesh = torch.meshgrid(*axes, indexing="ij")
    coords = list(reversed(mesh)) + [torch.ones_like(mesh[0])]     # (x, y[, z], 1)
    base = torch.stack(coords, dim=-1).reshape(-1, len(coords)).to(theta.device)   # (P, k+1)
    grid = torch.einsum("nij,pj->npi", theta.double(), base)
    return grid.reshape(theta.shape[0], *dims, len(dims)).to(theta.dtype)


def _sample(img, ys, xs):
    """Bilinear samples of img (C, H, W) at float positions ys, xs (same shape S); 0 outside."""
    c, h, w = img.shape
    y0, x0 = ys.floor(), xs.floor()
    out = torch.zeros(c, *ys.shape, dtype=img.dtype, device=img.device)
    for dy in (0, 1):
        for dx in (0, 1):
            yi, xi = y0 + dy, x0 + dx
            wgt = (1 - (ys - yi).abs()) * (1 - (xs - xi).abs())
            ok = (yi >= 0) & (yi < h) & (xi >= 0) & (xi < w)
            v = img[:, yi.clamp(0, h - 1).long(), xi.clamp(0, w - 1).long()]
            out = out + torch.where(ok, wgt, torch.zeros_like(wgt)) * v
    return out


@op("DeformConv", attrs={"dilations": None, "group": 1, "kernel_shape": None, "offset_group": 1, "pads": None,
                         "strides": None})
def deform_conv(x, w, offset, b=None, mask=None, *, dilations=None, group=1, kernel_shape=None, offset_group=1,
                pads=None, strides=None):
    """y[n, o, i, j] = b[o] + Σ_{c, k} w[o, c, k] · mask · x̃[n, c](p_ij + k·dil − pad + Δ), x̃ bilinear (2-D)."""
    n, cin, _, _ = x.shape
    cout, cpg, kh, kw = w.shape
    dh, dw = dilations or [1, 1]
    sh, sw = strides or [1, 1]
    pt, pl = (pads or [0, 0, 0, 0])[:2]
    oh, ow = offset.shape[2], offset.shape[3]
    k = kh * kw
    off = offset.reshape(n, offset_group, k, 2, oh, ow).double()
    msk = (mask.reshape(n, offset_group, k, oh, ow).double() if mask is not None
           else torch.ones(n, offset_group, k, oh, ow, dtype=torch.float64, device=x.device))
    ki = torch.arange(kh, device=x.device).repeat_interleave(kw).double()
    kj = torch.arange(kw, device=x.device).repeat(kh).double()
    base_y = (torch.arange(oh, device=x.device).double() * sh - pt).reshape(1, oh, 1) + (ki * dh).reshape(k, 1, 1)
    base_x = (torch.arange(ow, device=x.device).double() * sw - pl).reshape(1, 1, ow) + (kj * dw).reshape(k, 1, 1)
    cols = torch.empty(n, cin, k, oh, ow, dtype=torch.float64, device=x.device)
    per = cin // offset_group
    xd = x.double()
    for b_ in range(n):
        for g in range(offset_group):
            ys, xs = base_y + off[b_, g, :, 0], base_x + off[b_, g, :, 1]
            cols[b_, g * per:(g + 1) * per] = _sample(xd[b_, g * per:(g + 1) * per], ys, xs) * msk[b_, g]
    cols = cols.reshape(n, group, cpg * k, oh * ow)
    wg = w.double().reshape(group, cout // group, cpg * k)
    y = torch.einsum("gok,ngkp->ngop", wg, cols).reshape(n, cout, oh, ow)
    if b is not None:
        y = y + b.double().reshape(1, -1, 1, 1)
    return y.to(x.dtype)


@op("MaxUnpool", attrs={"kernel_shape": None, "pads": None, "strides": None}, value_inputs=(2,))
def max_unpool(x, indices, output_shape=None, *, kernel_shape=None, pads=None, strides=None):
    d = len(kernel_shape)
    st, pad = strides or [1] * d, pads or [0] * (2 * d)
    inferred = list(x.shape[:2]) + [(x.shape[2 + i] - 1) * st[i] - (pad[i] + pad[d + i]) + kernel_shape[i]
                                    for i in range(d)]
    flat = torch.zeros(int(torch.tensor(inferred).prod()), dtype=x.dtype, device=x.device)
    flat[indices.reshape(-1).to(x.device).long()] = x.reshape(-1)
    y = flat.reshape(inferred)
    if output_shape is None:
        return y
    out = torch.zeros([int(v) for v in output_shape.tolist()], dtype=x.dtype, device=x.device)
    out[tuple(slice(0, s) for s in inferred)] = y
    return out
