"""The depthwise convolution kernel for channels-last tensors, tiled by output rows (config layout "rows").

    y[n, oh, ow, c] = act(b[c] + Σ_{kh, kw} x[n, oh·sh + kh·dh − ph, ow·sw + kw·dw − pw, c] · w[kh, kw, c] [+ r])

triton_depthwise._depthwise_kernel tiles BLOCK_P flattened positions: every tap recomputes each position's input
row and column (a division by OW per position, two int64 multiplies and four compares per position and tap), and a
tile that crosses a row end reads two rows. Here one program owns BH output rows × BW consecutive columns × BC
channels of one sample, so per tap the input row is ONE scalar (ih, its bounds check and its offset once per
program row) and the columns a vector of BW: the per-element integer work is a column add.

BH > 1 also reuses input rows across output rows: the program walks the RH = (BH−1)·SH + (KH−1)·DH + 1 input rows
its outputs touch, loads each row's KW shifted [BW, BC] slices once, and adds them into every output row o that
uses that input row, with tap kh = (r − o·SH) / DH (a [BH] gather of weights, masked where it is not a tap).
x is read from L1/L2 RH·KW times per BH output rows instead of BH·KH·KW times (a 7×7 kernel at BH = 4: 17.5
instead of 49 loads per output row), for RH / KH times the multiply-adds, the masked ones included. BH = 1 is the
plain tap loop with no extra work.

Memory traffic is the same as the flat kernel's (x ≈ once from DRAM, w once per program from L2, y written once);
the gain is in instructions and L1 loads per output, which is what bounds a 7×7 depthwise convolution on Hopper
(49 multiply-adds and 49 loads per output against 4 bytes of DRAM traffic). Float32 accumulation, one rounding.
The epilogue (bias, residual, activation, the pool's partial sums, the next layer's quantized codes) is the flat
kernel's, on a 3-D tile.
"""

import triton
import triton.language as tl

from .quant_store import store_codes
from .triton_gemm import residual_activation


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
    tap-major (KH·KW, C). Any stride and dilation: output row o takes tap kh from input row r when
    r − o·SH = kh·DH. Part / STORE_Y / POOL / Q as in
    triton_depthwise._depthwise_kernel. C8: C and the x / y strides are multiples of 8 (the launcher checks), said to
    the compiler so that 8 channels load and store as one 16-byte access where the specialiser, which knows only
    multiples of 16, cannot tell (MobileNetV3's 72, 120, 200, 184 channels)."""
    if C8:
        C = tl.multiple_of(C, 8)
        s_xn, s_xh, s_xw = tl.multiple_of(s_xn, 8), tl.multiple_of(s_xh, 8), tl.multiple_of(s_xw, 8)
        s_yn, s_yh, s_yw = tl.multiple_of(s_yn, 8), tl.multiple_of(s_yh, 8), tl.multiple_of(s_yw, 8)
    n = tl.program_id(2).to(tl.int64)
    col_blocks = tl.cdiv(OW, BW)
    pid = tl.program_id(0)
    oh0 = (pid // col_blocks) * BH
    o = tl.arange(0, BH)
    ow = (pid % col_blocks) * BW + tl.arange(0, BW)
    c = tl.program_id(1) * BC + tl.arange(0, BC)
    c_in, ow_in, oh_in = c < C, ow < OW, (oh0 + o) < OH
    x_n = X + n * s_xn + c[None, :]
    acc = tl.zeros((BH, BW, BC), dtype=tl.float32)
    for r in tl.static_range((BH - 1) * SH + (KH - 1) * DH + 1):
        ih = oh0 * SH - pad_h + r
        kh = (r - o * SH) // DH                 # the tap each output row takes from this input row
        use = (r - o * SH >= 0) & ((r - o * SH) % DH == 0) & (kh < KH) & oh_in
        row = x_n + ih.to(tl.int64) * s_xh
        ih_v = tl.zeros((BW,), dtype=tl.int32) + ih          # as a vector: the interpreter masks with no scalars
        row_ok = ow_in & (ih_v >= 0) & (ih_v < H)
        for kw in tl.static_range(KW):
            iw = ow * SW - pad_w + kw * DW
            ok = row_ok & (iw >= 0) & (iw < W)
            xv = tl.load(row + (iw.to(tl.int64) * s_xw)[:, None], mask=ok[:, None] & c_in[None, :], other=0.0)
            wv = tl.load(Wt + (kh * KW + kw)[:, None] * C + c[None, :], mask=use[:, None] & c_in[None, :],
                         other=0.0)
            acc += xv.to(tl.float32)[None, :, :] * wv.to(tl.float32)[:, None, :]
    if HAS_BIAS:
        acc += tl.load(Bias + c, mask=c_in, other=0.0).to(tl.float32)[None, None, :]
    oh = (oh0 + o).to(tl.int64)
    mask = oh_in[:, None, None] & ow_in[None, :, None] & c_in[None, None, :]
    r_val = 0.0
    if HAS_RES:
        r_offs = (n * s_rn + oh[:, None, None] * s_rh + ow.to(tl.int64)[None, :, None] * s_rw
                  + c.to(tl.int64)[None, None, :] * s_rc)
        r_val = tl.load(R + r_offs, mask=mask, other=0.0).to(tl.float32)
    acc = residual_activation(acc, r_val, ACT, alpha, beta, HAS_RES, RES_FIRST)
    stored = acc.to(Y.dtype.element_ty)
    y_offs = n * s_yn + oh[:, None, None] * s_yh + ow.to(tl.int64)[None, :, None] * s_yw + c[None, None, :]
    if STORE_Y:
        tl.store(Y + y_offs, stored, mask=mask)
    if Q_KIND != 0:
        store_codes(Q + y_offs, stored, mask, q_scale, q_r, q_zp, q_lo, q_hi, Q_KIND)
    if POOL:
        part = tl.sum(tl.sum(tl.where(mask, stored.to(tl.float32), 0.0), axis=0), axis=0)
        tl.store(Part + (n * tl.num_programs(0) + pid) * C + c, part, mask=c_in)


def rows_grid(out_hw, c: int, n: int, cfg: dict) -> tuple[int, int, int]:
    """The launch grid: (row blocks × column blocks, channel blocks, samples)."""
    return (triton.cdiv(out_hw[0], cfg["BH"]) * triton.cdiv(out_hw[1], cfg["BW"]), triton.cdiv(c, cfg["BC"]), n)

