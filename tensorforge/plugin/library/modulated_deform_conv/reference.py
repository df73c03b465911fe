"""MMCV modulated deformable convolution (DCNv2) in torch, from mmcv's documented definition.

For output (n, o, y, x), kernel tap k = (i, j) and input channel c of deformable group g:
    p = (y·sh − ph + i·dh + Δy[n, g, k, y, x],  x·sw − pw + j·dw + Δx[n, g, k, y, x])
    col[n, c·K + k, y, x] = bilinear(input[n, c], p) · mask[n, g·K + k, y, x]      (zero outside the image)
    out = weight (grouped) @ col + bias
offset channels per group are interleaved (Δy, Δx) per tap: offset[:, g·2K + 2k] = Δy, [+1] = Δx.
Memory: the column buffer holds N·Cin·K·Ho·Wo values (im2col), then one grouped GEMM.
"""

import torch


def output_size(size: int, k: int, stride: int, pad: int, dil: int) -> int:
    return (size + 2 * pad - (dil * (k - 1) + 1)) // stride + 1


def bilinear_zero(img: torch.Tensor, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """img [B, C, H, W]; y, x [B, ...] → [B, C, ...], zero-padded bilinear sampling."""
    B, C, H, W = img.shape
    flat = img.reshape(B, C, H * W)
    y0, x0 = torch.floor(y), torch.floor(x)
    out = 0
    for dy, dx in ((0, 0), (0, 1), (1, 0), (1, 1)):
        yy, xx = y0 + dy, x0 + dx
        w = (1 - (y - yy).abs()) * (1 - (x - xx).abs())
        ok = (yy >= 0) & (yy <= H - 1) & (xx >= 0) & (xx <= W - 1)
        idx = (yy.clamp(0, H - 1) * W + xx.clamp(0, W - 1)).long().reshape(B, 1, -1).expand(B, C, -1)
        vals = torch.gather(flat, 2, idx).reshape(B, C, *y.shape[1:])
        out = out + vals * (w * ok).unsqueeze(1)
    return out


def deform_columns(input, offset, mask, kh, kw, stride, padding, dilation, deform_groups):
    N, Cin, H, W = input.shape
    Ho, Wo = offset.shape[2], offset.shape[3]
    K, G = kh * kw, deform_groups
    base_y = (torch.arange(Ho, device=input.device) * stride[0] - padding[0]).view(1, 1, Ho, 1).float()
    base_x = (torch.arange(Wo, device=input.device) * stride[1] - padding[1]).view(1, 1, 1, Wo).float()
    img = input.float().reshape(N * G, Cin // G, H, W)
    off = offset.float().reshape(N, G, K, 2, Ho, Wo)
    m = mask.float().reshape(N, G, K, Ho, Wo)
    cols = []
    for k in range(K):
        i, j = divmod(k, kw)
        y = (base_y + i * dilation[0] + off[:, :, k, 0]).reshape(N * G, Ho, Wo)
        x = (base_x + j * dilation[1] + off[:, :, k, 1]).reshape(N * G, Ho, Wo)
        v = bilinear_zero(img, y, x) * m[:, :, k].reshape(N * G, 1, Ho, Wo)       # [N·G, Cin/G, Ho, Wo]
        cols.append(v.reshape(N, Cin, Ho * Wo))
    return torch.stack(cols, dim=2).reshape(N, Cin * K, Ho * Wo)                   # channel-major, then tap


def conv_from_columns(cols, weight, bias, groups, Ho, Wo):
    N = cols.shape[0]
    Cout = weight.shape[0]
    w = weight.to(cols.dtype).reshape(groups, Cout // groups, -1)
    c = cols.reshape(N, groups, -1, Ho * Wo)
    out = torch.einsum("gok,ngkp->ngop", w, c).reshape(N, Cout, Ho, Wo)
    if bias is not None:
        out = out + bias.to(cols.dtype).view(1, -1, 1, 1)
    return out


def modulated_deform_conv(input, offset, mask, weight, bias=None, *, stride=(1, 1), padding=(0, 0),
                          dilation=(1, 1), groups=1, deform_groups=1):
    kh, kw = weight.shape[2], weight.shape[3]
    cols = deform_columns(input, offset, mask, kh, kw, stride, padding, dilation, deform_groups)
    out = conv_from_columns(cols, weight, bias, groups, offset.shape[2], offset.shape[3])
    return out.to(input.dtype)
