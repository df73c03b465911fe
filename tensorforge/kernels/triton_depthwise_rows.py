"""The depthwise convolution kernel for channels-last tensors, tiled by output rows (config layout "rows").

    y[n, oh, ow, c] = act(b[c] + Σ_{kh, kw} x[n, oh·sh + kh·dh − ph, ow·sw + kw·dw − pw, c] · w[kh, kw, c] [+ r])

One program owns BH output rows (1, 2 or 4) × BW consecutive columns × BC channels of one sample, with one
float32 [BW, BC] accumulator per output row. It walks the RH = (BH−1)·SH + (KH−1)·DH + 1 input rows its outputs
touch; each input row's KW shifted [BW, BC] slices are loaded once and added into every output row that uses that
input row, with the tap kh = (r − o·SH) / DH (weights loaded as 0 where input row r is no tap of output row o:
RH/KH times the multiply-adds of the taps, 10/7 for a 7×7 kernel at BH = 4). What bounds a 7×7 depthwise
convolution on Hopper is L1 loads, not DRAM (49 multiply-adds and 49 input loads per output against 4 bytes of
DRAM traffic): at BH = 4 a program loads x RH·KW = 70 times per 4 output rows instead of 196 (the weights, one
[BC] load per tap and output row, then dominate unless a thread holds several columns). The row loop runs at run
time and only the KW column taps are unrolled: with all KH·KW taps unrolled the compiler hoisted every load, and
the sm_90 code of a 7×7 tile needed 255 registers and spilled (cuobjdump -res-usage: 272 bytes of stack; the flat
kernel 992). BH = 1 is the plain tap loop.

Against the flat kernel (triton_depthwise._depthwise_kernel, BLOCK_P flattened positions): at BH = 1 and the same
outputs per program the sm_90 code had the same loads (147 16-byte loads and 784 FMAs per thread, all taps
unrolled, for a 7×7 tile of 32 × 64); the differences are the row reuse above and C8: channel counts that are
multiples of 8 but not 16 (MobileNetV3's 72, 120, 200, 184) get 16-byte loads here (the flat kernel's are 2-byte:
226 loads instead of 51 for a 5×5 stride-2 tile). Memory traffic is the flat kernel's: x ≈ once from DRAM, w once
per program from L2, y written once. Float32 accumulation, one rounding. The epilogue (bias, residual,
activation, the pool's partial sums, the next layer's quantized codes) is the flat kernel's, per output row.
"""

import triton
import triton.language as tl

from .quant_store import store_codes
from .triton_gemm import residual_activation


@triton.jit
def _row_taps(acc, xv, Wt, C, c, c_in, r, o: tl.constexpr, kw: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
              SH: tl.constexpr, DH: tl.constexpr):
    """acc (output row o of the program) += xv (input row r, column tap kw) · w[kh, kw], where input row r is tap
    kh = (r − o·SH) / DH of output row o; the weights load as 0 where it is none (r runs at run time)."""
    t = tl.zeros_like(c) + (r - o * SH)          # as a vector: the interpreter masks with no scalars
    use = c_in & (t >= 0) & (t % DH == 0) & (t // DH < KH)
    wv = tl.load(Wt + ((t // DH) * KW + kw) * C + c, mask=use, other=0.0).to(tl.float32)
    return acc + xv * wv[None, :]


@triton.jit
def _row_out(acc, oh, ow, c, ow_in, c_in, OH, n, Bias, R, Y, s_rn, s_rc, s_rh, s_rw, s_yn, s_yh, s_yw, alpha, beta,
             HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, RES_FIRST: tl.constexpr, ACT: tl.constexpr,
             STORE_Y: tl.constexpr, POOL: tl.constexpr, Q, q_scale, q_r, q_zp, q_lo, q_hi, Q_KIND: tl.constexpr):
    """One output row's epilogue: + bias, residual and activation, the store (y and/or its codes); returns the
    row's float32 sum per channel of y as stored (POOL), else 0."""
    ohv = tl.zeros((ow.shape[0],), dtype=tl.int32) + oh        # as a vector: the interpreter masks with no scalars
    mask = (ow_in & (ohv < OH))[:, None] & c_in[None, :]
    if HAS_BIAS:
        acc += tl.load(Bias + c, mask=c_in, other=0.0).to(tl.float32)[None, :]
    r_val = 0.0
    if HAS_RES:
        r_offs = (n * s_rn + oh.to(tl.int64) * s_rh + ow.to(tl.int64)[:, None] * s_rw
                  + c.to(tl.int64)[None, :] * s_rc)
        r_val = tl.load(R + r_offs, mask=mask, other=0.0).to(tl.float32)
    acc = residual_activation(acc, r_val, ACT, alpha, beta, HAS_RES, RES_FIRST)
    stored = acc.to(Y.dtype.element_ty)
    y_offs = n * s_yn + oh.to(tl.int64) * s_yh + ow.to(tl.int64)[:, None] * s_yw + c[None, :]
    if STORE_Y:
        tl.store(Y + y_offs, stored, mask=mask)
    if Q_KIND != 0:
        store_codes(Q + y_offs, stored, mask, q_scale, q_r, q_zp, q_lo, q_hi, Q_KIND)
    part = tl.zeros((c.shape[0],), dtype=tl.float32)
    if POOL:
        part = tl.sum(tl.where(mask, stored.to(tl.float32), 0.0), axis=0)
    return part


@triton.jit
def _depthwise_rows_kernel(X, Wt, Bias, R, Y, C, H, W, OH, OW, s_xn, s_xh, s_xw, s_yn, s_yh, s_yw,
                           s_rn, s_rc, s_rh, s_rw, pad_h, pad_w, alpha, beta,
                           KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
                           DH: tl.constexpr, DW: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr,
                           RES_FIRST: tl.constexpr, ACT: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr,
                           BC: tl.constexpr, C8: tl.constexpr = False, Part=None, STORE_Y: tl.constexpr = True,
                           POOL: tl.constexpr = False,
                           Q=None, q_scale=1.0, q_r=1.0, q_zp=0.0, q_lo=0.0, q_hi=0.0, Q_KIND: tl.constexpr = 0):
    """Program (row block × column block, channel block, sample); x and y channels-last (channel stride 1), Wt
    tap-major (KH·KW, C); BH 1, 2 or 4. Part / STORE_Y / POOL / Q as in triton_depthwise._depthwise_kernel.
    C8: C and the x / y strides other than the channels' are passed divided by 8 (the launcher checks they are
    multiples of 8) and multiplied back here by the constant 8, so the compiler knows them to be multiples of 8
    and moves 8 channels as one 16-byte access; Triton's specialiser only marks arguments that are multiples of
    16 (tl.multiple_of on a scalar argument changed nothing in the sm_90 code: 2-byte loads either way)."""
    if C8:
        C = C * 8
        s_xn, s_xh, s_xw, s_yn, s_yh, s_yw = s_xn * 8, s_xh * 8, s_xw * 8, s_yn * 8, s_yh * 8, s_yw * 8
    n = tl.program_id(2).to(tl.int64)
    col_blocks = tl.cdiv(OW, BW)
    pid = tl.program_id(0)
    oh0 = (pid // col_blocks) * BH
    ow = (pid % col_blocks) * BW + tl.arange(0, BW)
    c = tl.program_id(1) * BC + tl.arange(0, BC)
    c_in, ow_in = c < C, ow < OW
    x_n = X + n * s_xn + c[None, :]
    acc0 = tl.zeros((BW, BC), dtype=tl.float32)
    acc1 = tl.zeros((BW, BC), dtype=tl.float32)
    acc2 = tl.zeros((BW, BC), dtype=tl.float32)
    acc3 = tl.zeros((BW, BC), dtype=tl.float32)
    for r in range((BH - 1) * SH + (KH - 1) * DH + 1):      # run time: unrolling every tap spilled (sm_90, 7×7)
        ih = oh0 * SH - pad_h + r
        row = x_n + ih.to(tl.int64) * s_xh
        ih_v = tl.zeros((BW,), dtype=tl.int32) + ih          # as a vector: the interpreter masks with no scalars
        row_ok = ow_in & (ih_v >= 0) & (ih_v < H)
        for kw in tl.static_range(KW):
            iw = ow * SW - pad_w + kw * DW
            ok = row_ok & (iw >= 0) & (iw < W)
            xv = tl.load(row + (iw.to(tl.int64) * s_xw)[:, None], mask=ok[:, None] & c_in[None, :],
                         other=0.0).to(tl.float32)
            acc0 = _row_taps(acc0, xv, Wt, C, c, c_in, r, 0, kw, KH, KW, SH, DH)
            if BH > 1:
                acc1 = _row_taps(acc1, xv, Wt, C, c, c_in, r, 1, kw, KH, KW, SH, DH)
            if BH > 2:
                acc2 = _row_taps(acc2, xv, Wt, C, c, c_in, r, 2, kw, KH, KW, SH, DH)
                acc3 = _row_taps(acc3, xv, Wt, C, c, c_in, r, 3, kw, KH, KW, SH, DH)
    part = _row_out(acc0, oh0, ow, c, ow_in, c_in, OH, n, Bias, R, Y, s_rn, s_rc, s_rh, s_rw, s_yn, s_yh, s_yw,
                    alpha, beta, HAS_BIAS, HAS_RES, RES_FIRST, ACT, STORE_Y, POOL, Q, q_scale, q_r, q_zp, q_lo,
                    q_hi, Q_KIND)
    if BH > 1:
        part += _row_out(acc1, oh0 + 1, ow, c, ow_in, c_in, OH, n, Bias, R, Y, s_rn, s_rc, s_rh, s_rw, s_yn, s_yh,
                         s_yw, alpha, beta, HAS_BIAS, HAS_RES, RES_FIRST, ACT, STORE_Y, POOL, Q, q_scale, q_r, q_zp,
                         q_lo, q_hi, Q_KIND)
    if BH > 2:
        part += _row_out(acc2, oh0 + 2, ow, c, ow_in, c_in, OH, n, Bias, R, Y, s_rn, s_rc, s_rh, s_rw, s_yn, s_yh,
                         s_yw, alpha, beta, HAS_BIAS, HAS_RES, RES_FIRST, ACT, STORE_Y, POOL, Q, q_scale, q_r, q_zp,
                         q_lo, q_hi, Q_KIND)
        part += _row_out(acc3, oh0 + 3, ow, c, ow_in, c_in, OH, n, Bias, R, Y, s_rn, s_rc, s_rh, s_rw, s_yn, s_yh,
                         s_yw, alpha, beta, HAS_BIAS, HAS_RES, RES_FIRST, ACT, STORE_Y, POOL, Q, q_scale, q_r, q_zp,
                         q_lo, q_hi, Q_KIND)
    if POOL:
        tl.store(Part + (n * tl.num_programs(0) + pid) * C + c, part, mask=c_in)


ROWS_PER_PROGRAM = (1, 2, 4)     # the kernel's accumulators: one per output row


def rows_grid(out_hw, c: int, n: int, cfg: dict) -> tuple[int, int, int]:
    """The launch grid: (row blocks × column blocks, channel blocks, samples)."""
    if cfg["BH"] not in ROWS_PER_PROGRAM:
        raise ValueError(f"rows config BH={cfg['BH']}: the kernel has accumulators for {ROWS_PER_PROGRAM} rows")
    return (triton.cdiv(out_hw[0], cfg["BH"]) * triton.cdiv(out_hw[1], cfg["BW"]), triton.cdiv(c, cfg["BC"]), n)

