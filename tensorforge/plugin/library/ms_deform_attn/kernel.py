"""Triton multi-scale deformable attention: one program per (batch, query, head) × a block of D channels.

Per level it reads (H, W, start) once, then per sampling point computes the pixel position and the 4 bilinear
weights as scalars (times the attention weight) and gathers 4 contiguous D-vectors of `value` (layout
[bs, keys, heads, D], so the channel loads are coalesced). fp16/bf16 load, fp32 accumulate.
Memory traffic per (query, head): L·P·(4·D·itemsize + 12 bytes) read, D·itemsize written.
"""

import triton
import triton.language as tl


@triton.jit
def msda_kernel(v_ptr, shapes_ptr, starts_ptr, loc_ptr, attn_ptr, out_ptr, NK, NQ, HEADS, D, L, P,
                BLOCK_D: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    h = pid % HEADS
    q = (pid // HEADS) % NQ
    b = pid // (HEADS * NQ)
    ds = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    dmask = ds < D
    acc = tl.zeros((BLOCK_D,), tl.float32)
    row = ((b * NQ + q) * HEADS + h) * L * P                  # index of (b, q, h, l=0, p=0) in attn
    for lvl in range(0, L):
        H = tl.load(shapes_ptr + lvl * 2).to(tl.int32)
        W = tl.load(shapes_ptr + lvl * 2 + 1).to(tl.int32)
        start = tl.load(starts_ptr + lvl).to(tl.int64)
        vbase = v_ptr + ((b * NK + start) * HEADS + h) * D + ds
        for pt in range(0, P):
            i = row + lvl * P + pt
            a = tl.load(attn_ptr + i).to(tl.float32)
            x = tl.load(loc_ptr + i * 2).to(tl.float32) * W - 0.5
            y = tl.load(loc_ptr + i * 2 + 1).to(tl.float32) * H - 0.5
            x0f = tl.floor(x)
            y0f = tl.floor(y)
            lx = x - x0f
            ly = y - y0f
            x0 = x0f.to(tl.int32)
            y0 = y0f.to(tl.int32)
            for corner in tl.static_range(4):
                yy = y0 + corner // 2
                xx = x0 + corner % 2
                wy = ly if corner // 2 == 1 else 1.0 - ly
                wx = lx if corner % 2 == 1 else 1.0 - lx
                ok = (yy >= 0) & (yy < H) & (xx >= 0) & (xx < W)
                # a scalar condition cannot join a vector mask portably: clamp the address, zero the weight
                key = (tl.minimum(tl.maximum(yy, 0), H - 1) * W + tl.minimum(tl.maximum(xx, 0), W - 1)).to(tl.int64)
                v = tl.load(vbase + key * HEADS * D, mask=dmask, other=0.0).to(tl.float32)
                acc += v * (a * wy * wx * tl.where(ok, 1.0, 0.0))
    tl.store(out_ptr + ((b * NQ + q) * HEADS + h) * D + ds, acc.to(out_ptr.dtype.element_ty), mask=dmask)


def launch(value, shapes, starts, loc, attn, out, block_d=64, num_warps=2):
    bs, NK, HEADS, D = value.shape
    NQ, L, P = loc.shape[1], loc.shape[3], loc.shape[4]
    if bs * NQ * HEADS == 0:
        return
    block_d = min(block_d, triton.next_power_of_2(D))
    grid = (bs * NQ * HEADS, triton.cdiv(D, block_d))
    msda_kernel[grid](value, shapes, starts, loc, attn, out, NK, NQ, HEADS, D, L, P, BLOCK_D=block_d,
                      num_warps=num_warps)
