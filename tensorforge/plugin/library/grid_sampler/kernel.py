"""Triton grid sampler (bilinear / nearest; zeros / border / reflection padding; align_corners 0/1).

One program handles BLOCK_P output pixels of one image: it reads their grid coordinates once, turns them into
source positions and weights, then loops over channels gathering 4 (bilinear) or 1 (nearest) input values per
pixel. fp16/bf16 load, fp32 math. Memory traffic per output element: 4 (or 1) gathered reads + 1 write; the grid
is read once per pixel, not per channel.
"""

import triton
import triton.language as tl


@triton.jit
def _reflect(v, twice_low, twice_high):
    lo = twice_low / 2.0
    span = (twice_high - twice_low) / 2.0
    a = tl.abs(v - lo)
    flips = tl.floor(a / span)
    extra = a - flips * span
    odd = (flips - 2.0 * tl.floor(flips / 2.0)) != 0.0
    return tl.where(odd, span - extra + lo, extra + lo)


@triton.jit
def _source(coord, size, PAD: tl.constexpr, ALIGN: tl.constexpr):
    if ALIGN:
        v = (coord + 1.0) / 2.0 * (size - 1)
    else:
        v = ((coord + 1.0) * size - 1.0) / 2.0
    if PAD == 2:
        if ALIGN:
            v = tl.where(size > 1, _reflect(v, 0.0, 2.0 * (size - 1)), 0.0)
        else:
            v = _reflect(v, -1.0, 2.0 * size - 1.0)
    if PAD >= 1:
        v = tl.minimum(tl.maximum(v, 0.0), size - 1.0)
    return v


@triton.jit(do_not_specialize=["C", "H", "W", "P"])
def grid_sampler_kernel(x_ptr, grid_ptr, out_ptr, C, H, W, P, MODE: tl.constexpr, PAD: tl.constexpr,
                        ALIGN: tl.constexpr, BLOCK_P: tl.constexpr):
    n = tl.program_id(1).to(tl.int64)
    p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    pmask = p < P
    gx = tl.load(grid_ptr + (n * P + p) * 2, mask=pmask, other=0.0).to(tl.float32)
    gy = tl.load(grid_ptr + (n * P + p) * 2 + 1, mask=pmask, other=0.0).to(tl.float32)
    ix = _source(gx, W * 1.0, PAD, ALIGN)
    iy = _source(gy, H * 1.0, PAD, ALIGN)
    if MODE == 1:
        rx = tl.floor(ix + 0.5)
        rx = tl.where((rx - ix == 0.5) & (rx - 2.0 * tl.floor(rx / 2.0) != 0.0), rx - 1.0, rx)   # half to even
        ry = tl.floor(iy + 0.5)
        ry = tl.where((ry - iy == 0.5) & (ry - 2.0 * tl.floor(ry / 2.0) != 0.0), ry - 1.0, ry)
        xi = rx.to(tl.int32)
        yi = ry.to(tl.int32)
        ok = pmask & (xi >= 0) & (xi < W) & (yi >= 0) & (yi < H)
        for c in range(0, C):
            base = x_ptr + (n * C + c) * H * W
            v = tl.load(base + yi * W + xi, mask=ok, other=0.0).to(tl.float32)
            tl.store(out_ptr + (n * C + c) * P + p, v.to(out_ptr.dtype.element_ty), mask=pmask)
    else:
        x0f = tl.floor(ix)
        y0f = tl.floor(iy)
        lx = ix - x0f
        ly = iy - y0f
        x0 = x0f.to(tl.int32)
        y0 = y0f.to(tl.int32)
        x1 = x0 + 1
        y1 = y0 + 1
        in_x0 = (x0 >= 0) & (x0 < W)
        in_x1 = (x1 >= 0) & (x1 < W)
        in_y0 = (y0 >= 0) & (y0 < H)
        in_y1 = (y1 >= 0) & (y1 < H)
        for c in range(0, C):
            base = x_ptr + (n * C + c) * H * W
            v00 = tl.load(base + y0 * W + x0, mask=pmask & in_y0 & in_x0, other=0.0).to(tl.float32)
            v01 = tl.load(base + y0 * W + x1, mask=pmask & in_y0 & in_x1, other=0.0).to(tl.float32)
            v10 = tl.load(base + y1 * W + x0, mask=pmask & in_y1 & in_x0, other=0.0).to(tl.float32)
            v11 = tl.load(base + y1 * W + x1, mask=pmask & in_y1 & in_x1, other=0.0).to(tl.float32)
            v = (1 - ly) * ((1 - lx) * v00 + lx * v01) + ly * ((1 - lx) * v10 + lx * v11)
            tl.store(out_ptr + (n * C + c) * P + p, v.to(out_ptr.dtype.element_ty), mask=pmask)


def launch(x, grid, out, mode: int, padding: int, align_corners: bool, block_p: int = 128, num_warps: int = 4):
    N, C, H, W = x.shape
    P = grid.shape[1] * grid.shape[2]
    if N == 0 or P == 0:
        return
    grid_sampler_kernel[(triton.cdiv(P, block_p), N)](x, grid, out, C, H, W, P, MODE=int(mode), PAD=int(padding),
                                                      ALIGN=bool(align_corners), BLOCK_P=block_p, num_warps=num_warps)
