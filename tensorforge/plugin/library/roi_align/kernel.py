"""Triton MMCV RoIAlign: one program per (roi, output row, output column) × a block of channels.

The program reads its roi, derives the sampling grid (adaptive when sampling_ratio = 0: a runtime loop bound),
and for each sample computes the 4 bilinear weights once and gathers 4 channel vectors (NCHW: stride H·W), so
all arithmetic on coordinates is scalar and the channel loads are vectorised. fp16/bf16 load, fp32 accumulate.
Memory traffic: 4·grid_h·grid_w·C·itemsize bytes read per output pixel, C·itemsize written.
"""

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["C", "H", "W", "OH", "OW", "sampling_ratio"])
def roi_align_kernel(x_ptr, rois_ptr, out_ptr, C, H, W, OH, OW, spatial_scale, sampling_ratio,
                     ALIGNED: tl.constexpr, IS_MAX: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    pw = pid % OW
    ph = (pid // OW) % OH
    k = pid // (OW * OH)
    cs = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cs < C
    r = rois_ptr + k * 5
    b = tl.load(r).to(tl.int64)
    off = 0.5 if ALIGNED else 0.0
    sx = tl.load(r + 1).to(tl.float32) * spatial_scale - off
    sy = tl.load(r + 2).to(tl.float32) * spatial_scale - off
    w = tl.load(r + 3).to(tl.float32) * spatial_scale - off - sx
    h = tl.load(r + 4).to(tl.float32) * spatial_scale - off - sy
    if not ALIGNED:
        w = tl.maximum(w, 1.0)
        h = tl.maximum(h, 1.0)
    bw = w / OW
    bh = h / OH
    gh = tl.where(sampling_ratio > 0, sampling_ratio, tl.ceil(h / OH).to(tl.int32))
    gw = tl.where(sampling_ratio > 0, sampling_ratio, tl.ceil(w / OW).to(tl.int32))
    base = x_ptr + (b * C + cs.to(tl.int64)) * H * W
    if IS_MAX:
        acc = tl.full((BLOCK_C,), float("-inf"), tl.float32)
    else:
        acc = tl.zeros((BLOCK_C,), tl.float32)
    for iy in range(0, gh):
        y = sy + ph * bh + (iy + 0.5) * bh / gh
        for ix in range(0, gw):
            x = sx + pw * bw + (ix + 0.5) * bw / gw
            inside = (y >= -1.0) & (y <= H) & (x >= -1.0) & (x <= W)
            yc = tl.maximum(y, 0.0)
            xc = tl.maximum(x, 0.0)
            y0 = tl.minimum(yc.to(tl.int32), H - 1)
            x0 = tl.minimum(xc.to(tl.int32), W - 1)
            yc = tl.where(y0 >= H - 1, y0.to(tl.float32), yc)
            xc = tl.where(x0 >= W - 1, x0.to(tl.float32), xc)
            y1 = tl.minimum(y0 + 1, H - 1)
            x1 = tl.minimum(x0 + 1, W - 1)
            ly = yc - y0
            lx = xc - x0
            scale = tl.where(inside, 1.0, 0.0)
            v = ((1 - ly) * (1 - lx) * tl.load(base + y0 * W + x0, mask=cmask, other=0.0).to(tl.float32)
                 + (1 - ly) * lx * tl.load(base + y0 * W + x1, mask=cmask, other=0.0).to(tl.float32)
                 + ly * (1 - lx) * tl.load(base + y1 * W + x0, mask=cmask, other=0.0).to(tl.float32)
                 + ly * lx * tl.load(base + y1 * W + x1, mask=cmask, other=0.0).to(tl.float32)) * scale
            if IS_MAX:
                acc = tl.maximum(acc, v)
            else:
                acc += v
    if IS_MAX:
        res = tl.where(gh * gw > 0, acc, 0.0)
    else:
        res = acc / tl.maximum(gh * gw, 1).to(tl.float32)
    o = out_ptr + ((k * C + cs) * OH + ph) * OW + pw
    tl.store(o, res.to(out_ptr.dtype.element_ty), mask=cmask)


def launch(x, rois, out, spatial_scale, sampling_ratio, aligned, is_max, block_c=64, num_warps=2):
    K, C, OH, OW = out.shape
    H, W = x.shape[2], x.shape[3]
    if K == 0 or C == 0:
        return
    block_c = min(block_c, triton.next_power_of_2(C))
    grid = (K * OH * OW, triton.cdiv(C, block_c))
    roi_align_kernel[grid](x, rois, out, C, H, W, OH, OW, float(spatial_scale), int(sampling_ratio),
                           ALIGNED=bool(aligned), IS_MAX=bool(is_max), BLOCK_C=block_c, num_warps=num_warps)
