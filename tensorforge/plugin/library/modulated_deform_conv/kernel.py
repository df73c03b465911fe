"""Triton modulated deformable im2col (the DCNv2 sampling step); the GEMM that follows runs in torch (cuBLAS).

One program per (image n, input channel c) × BLOCK_P output pixels: for each of the K kernel taps it loads the
tap's (Δy, Δx, mask) for the channel's deformable group, samples the channel bilinearly with zero padding, and
writes col[n, c·K + k, p]. fp16/bf16 load, fp32 math. Memory traffic per column element: 4 gathered input
reads + 3 offset/mask reads + 1 write; the column buffer is N·Cin·K·Ho·Wo elements.
"""

import triton
import triton.language as tl


@triton.jit
def deform_im2col_kernel(x_ptr, off_ptr, mask_ptr, col_ptr, Cin, H, W, Ho, Wo, KW, K, CPG, G,
                         sh, sw, ph, pw, dh, dw, BLOCK_P: tl.constexpr):
    nc = tl.program_id(1).to(tl.int64)
    n = nc // Cin
    c = nc % Cin
    g = c // CPG
    P = Ho * Wo
    p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    pmask = p < P
    oy = p // Wo
    ox = p % Wo
    img = x_ptr + (n * Cin + c) * H * W
    for k in range(0, K):
        i = k // KW
        j = k % KW
        ob = off_ptr + ((n * G + g) * 2 * K + 2 * k) * P
        dy = tl.load(ob + p, mask=pmask, other=0.0).to(tl.float32)
        dx = tl.load(ob + P + p, mask=pmask, other=0.0).to(tl.float32)
        m = tl.load(mask_ptr + ((n * G + g) * K + k) * P + p, mask=pmask, other=0.0).to(tl.float32)
        y = (oy * sh - ph + i * dh).to(tl.float32) + dy
        x = (ox * sw - pw + j * dw).to(tl.float32) + dx
        y0f = tl.floor(y)
        x0f = tl.floor(x)
        ly = y - y0f
        lx = x - x0f
        y0 = y0f.to(tl.int32)
        x0 = x0f.to(tl.int32)
        ok_y0 = (y0 >= 0) & (y0 < H)
        ok_y1 = (y0 + 1 >= 0) & (y0 + 1 < H)
        ok_x0 = (x0 >= 0) & (x0 < W)
        ok_x1 = (x0 + 1 >= 0) & (x0 + 1 < W)
        v00 = tl.load(img + y0 * W + x0, mask=pmask & ok_y0 & ok_x0, other=0.0).to(tl.float32)
        v01 = tl.load(img + y0 * W + x0 + 1, mask=pmask & ok_y0 & ok_x1, other=0.0).to(tl.float32)
        v10 = tl.load(img + (y0 + 1) * W + x0, mask=pmask & ok_y1 & ok_x0, other=0.0).to(tl.float32)
        v11 = tl.load(img + (y0 + 1) * W + x0 + 1, mask=pmask & ok_y1 & ok_x1, other=0.0).to(tl.float32)
        v = ((1 - ly) * ((1 - lx) * v00 + lx * v01) + ly * ((1 - lx) * v10 + lx * v11)) * m
        tl.store(col_ptr + ((n * Cin + c) * K + k) * P + p, v.to(col_ptr.dtype.element_ty), mask=pmask)


def launch(x, offset, mask, cols, kh, kw, stride, padding, dilation, deform_groups, block_p=128, num_warps=4):
    N, Cin, H, W = x.shape
    Ho, Wo = offset.shape[2], offset.shape[3]
    if N == 0 or Cin == 0 or Ho * Wo == 0:
        return
    grid = (triton.cdiv(Ho * Wo, block_p), N * Cin)
    deform_im2col_kernel[grid](x, offset, mask, cols, Cin, H, W, Ho, Wo, kw, kh * kw, Cin // deform_groups,
                               deform_groups, stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1],
                               BLOCK_P=block_p, num_warps=num_warps)
