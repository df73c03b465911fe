"""Tactics: QuantizedMatMul / QuantizedConv (int8 and fp8 E4M3) as one Triton GEMM whose epilogue — zero-point
correction, per-channel requantize scale, bias, activation, the producer's own Q/DQ, post-Q bias, residual
(quantized or float), and the next layer's Q (as the output, or as a second output beside the float one) —
runs on the accumulator in registers.

    acc[m, n] = Σ_k A[m, k]·B[n, k]          int8 × int8 → int32 (tl.dot, IMMA/wgmma) or fp8 × fp8 → fp32
    acc      -= z'·Σ_k B[n, k]                (activation zero point; uint8 input is shifted to int8 first)
    out       = epilogue(acc) as in ir/ops/quantized.py, quantized with round-half-even (1.5·2²³ trick) and the
                IEEE quotient (from the reciprocal, corrected by two explicit FMAs), FMA contraction off elsewhere:
                bit-exact to the reference (none/ReLU/Clip/LeakyReLU; GELU as torch's CUDA kernel computes it)
A (M, K) row-major (im2col or the NHWC view of the input for a convolution) or, IMPLICIT=1, the convolution
input itself read as an implicit GEMM (row m = output pixel, column k = (r, s, c); outside the image the zero
point is loaded, a real 0) — no im2col copy; B (N, K) the stored weights, in (r, s, c) column order. When C is a
multiple of BK (TAP_ALIGNED) a K block is one tap's run of channels: its addresses are one offset per output pixel
plus the channel index, with no per-element division, and on channels-last input each row is one contiguous copy;
otherwise (the C = 3 stem) each column's offset and tap displacement come from a small table (tap_table).
TMA=1 (explicit GEMM only): A and B arrive as tensor descriptors and each K step is two bulk tensor copies into
shared memory (out-of-bounds rows and columns read as 0) — no per-element addresses or masks in the main loop.
With a zero fill (symmetric activations) masked loads stay asynchronous copies, so the main loop is pipelined;
a non-zero fill (an asymmetric zero point padding a convolution) needs a select in registers after each load.
Traffic: A once per column of tiles, B once per row of tiles (grouped GROUP_M tiles share it in L2), the
residual and the 1-byte output once; the (M, N) int32 accumulator never reaches memory — except with SPLIT=1
(split-K, for problems with fewer output tiles than multiprocessors: split_plan): S programs per tile each sum a
K range into an int32 partial (M, N) and `_splitk_reduce_kernel` adds the S partials and runs the same `_epilogue`,
8·S extra bytes per output element, bit for bit the one-pass result.
The epilogue's element math (quantize, integer codes, the fast-erf GELU) is quant_math.py's.
"""

import torch
import triton
import triton.language as tl

from .quant_common import is_fp8
from .quant_gemm import GEMM_OPS, gemm_layer_reason, make_gemm_kernel
from .quant_math import _act, _code_r, _quantize_r, reciprocal_scale
from .quant_split import sm_count, split_fits, split_plan
from .registry import tactic, triton_device_reason
from .triton_gemm import grouped_tile, kernel_activation, output_tiles

CONFIGS = [     # int8/fp8 MMA wants K steps of 64–128 bytes
    {"BM": 128, "BN": 128, "BK": 64, "G": 8, "stages": 4, "warps": 8},
    {"BM": 128, "BN": 64, "BK": 128, "G": 8, "stages": 3, "warps": 4},
    {"BM": 64, "BN": 128, "BK": 128, "G": 8, "stages": 3, "warps": 4},
    {"BM": 64, "BN": 64, "BK": 128, "G": 8, "stages": 4, "warps": 4},
    {"BM": 128, "BN": 128, "BK": 128, "G": 8, "stages": 3, "warps": 8},     # Hopper: 96 KB of stages, 185 regs
    {"BM": 128, "BN": 64, "BK": 64, "G": 8, "stages": 4, "warps": 4},       # small K (1×1 convs of 64 channels)
    {"BM": 128, "BN": 256, "BK": 64, "G": 8, "stages": 3, "warps": 8},      # wide N, float outputs (spills with Q out)
]
# activations whose Triton form rounds like the reference on CUDA: exact ops, and Gelu as torch's CUDA kernel
# writes it, x·0.5·(1 + erf(x·√½)) with libdevice's erff (the builder's exact check on int8 outputs is the judge)
EXACT_ACTIVATIONS = ("none", "Relu", "Clip", "LeakyRelu", "Gelu")
_OUT_KIND = {"int8": 1, "uint8": 1, "float8_e4m3fn": 2}


@triton.jit
def _zero_acc(FP8: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    """The (BM, BN) accumulator: float32 for fp8 products, int32 (exact) for int8 ones."""
    return tl.zeros((BM, BN), dtype=tl.float32 if FP8 else tl.int32)


@triton.jit
def _tma_acc(A, B, pid_m, pid_n, k_lo, k_hi, FP8: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
             BK: tl.constexpr):
    """Σ_k A[rows, k]·B[cols, k] over K columns [k_lo, k_hi) of output tile (pid_m, pid_n), A (M, K) and B (N, K)
    as tensor descriptors: two bulk copies per K step (rows and columns past the edges read as 0)."""
    acc = _zero_acc(FP8, BM, BN)
    for k in range(k_lo, k_hi, BK):
        a = A.load([pid_m * BM, k])
        b = B.load([pid_n * BN, k]).T
        if FP8:
            acc = tl.dot(a, b, acc)
        else:
            acc = tl.dot(a, b, acc, out_dtype=tl.int32)
    return acc


@triton.jit
def _epilogue(acc, rm, rn, m0, n0, M, N, Wsum, Mult, Bias, Post, R, C, C2, s_rm, s_rn, s_cm, s_cn,
              x_zp, alpha, beta, mid_scale, mid_r, mid_zp, mid_lo, mid_hi, res_scale, res_zp,
              y_scale, y_r, y_zp, y_lo, y_hi, q2_scale, q2_r, q2_zp, q2_lo, q2_hi,
              HAS_ZP: tl.constexpr, PER_CHANNEL: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_POST: tl.constexpr,
              RES: tl.constexpr, RES_FIRST: tl.constexpr, ACT: tl.constexpr, MID: tl.constexpr, OUT: tl.constexpr,
              OUT2: tl.constexpr, C_TMA: tl.constexpr = False, FAST_ERF: tl.constexpr = False):
    """The (BM, BN) accumulator tile of rows rm, columns rn → the layer's outputs, in registers: zero-point
    correction, requantize scale, bias, activation, mid Q/DQ, post-Q bias, residual, then the stores (C, and C2 for
    a second quantized output). Reads the per-channel vectors and the residual tile; writes 1–4 bytes per output.
    C_TMA: C is a tensor descriptor of (BM, BN) blocks, and the tile leaves through shared memory in one bulk copy
    (rows and columns past the edges dropped by the copy) instead of 1–2-byte stores from the MMA layout (each
    thread holds pairs of adjacent columns: 64 one-byte STG per thread for a 128×128 int8 tile on 8 warps)."""
    nmask = rn < N
    if HAS_ZP:
        acc = acc - x_zp * tl.load(Wsum + rn, mask=nmask, other=0)[None, :]
    if PER_CHANNEL:
        mult = tl.load(Mult + rn, mask=nmask, other=0.0)[None, :]
    else:
        mult = tl.load(Mult)
    t = acc.to(tl.float32) * mult
    if HAS_BIAS:
        t = t + tl.load(Bias + rn, mask=nmask, other=0.0).to(tl.float32)[None, :]
    if not RES_FIRST:
        t = _act(t, ACT, alpha, beta, FAST_ERF)
    if MID == 1:
        t = (_quantize_r(t, mid_scale, mid_r, mid_zp, mid_lo, mid_hi, 1) - mid_zp) * mid_scale
    elif MID == 2:
        t = _quantize_r(t, mid_scale, mid_r, 0.0, 0.0, 0.0, 2) * mid_scale
    if HAS_POST:
        t = t + tl.load(Post + rn, mask=nmask, other=0.0).to(tl.float32)[None, :]
    mask = (rm[:, None] < M) & nmask[None, :]
    if RES == 1:
        t = t + tl.load(R + rm[:, None].to(tl.int64) * s_rm + rn[None, :] * s_rn, mask=mask, other=0.0).to(tl.float32)
    elif RES == 2:
        r = tl.load(R + rm[:, None].to(tl.int64) * s_rm + rn[None, :] * s_rn, mask=mask, other=0)
        t = t + (r.to(tl.float32) - res_zp) * res_scale
    if RES_FIRST:
        t = _act(t, ACT, alpha, beta, FAST_ERF)
    if OUT == 0:
        v = t
    elif OUT == 1:
        v = _code_r(t, y_scale, y_r, y_zp, y_lo, y_hi)
    else:
        v = _quantize_r(t, y_scale, y_r, 0.0, 0.0, 0.0, 2)      # on the E4M3 grid: the conversion is exact
    if C_TMA:
        C.store([m0, n0], v.to(C.dtype))
    else:
        tl.store(C + rm[:, None].to(tl.int64) * s_cm + rn[None, :] * s_cn, v.to(C.dtype.element_ty), mask=mask)
    c2_ptr = C2 + rm[:, None].to(tl.int64) * s_cm + rn[None, :] * s_cn      # the second (quantized) output
    if OUT2 == 1:
        tl.store(c2_ptr, _code_r(t, q2_scale, q2_r, q2_zp, q2_lo, q2_hi).to(C2.dtype.element_ty), mask=mask)
    elif OUT2 == 2:
        tl.store(c2_ptr, _quantize_r(t, q2_scale, q2_r, 0.0, 0.0, 0.0, 2).to(C2.dtype.element_ty), mask=mask)


@triton.jit
def _qgemm_kernel(A, B, Wsum, Mult, Bias, Post, R, C, C2, Ktab, KT, P, KSPLIT, M, N, K, s_am, s_ak, s_bn, s_bk, s_rm, s_rn, s_cm, s_cn,
                  x_zp, alpha, beta, mid_scale, mid_r, mid_zp, mid_lo, mid_hi, res_scale, res_zp,
                  y_scale, y_r, y_zp, y_lo, y_hi, q2_scale, q2_r, q2_zp, q2_lo, q2_hi,
                  pad, H, W, CIN, OW, OHW, KW, sh, sw, ph, pw, dh, dw, sxn, sxh, sxw, sxc,
                  CONV: tl.constexpr, TAP_ALIGNED: tl.constexpr, TMA: tl.constexpr, PAD_ZERO: tl.constexpr, SHIFT: tl.constexpr, FP8: tl.constexpr, HAS_ZP: tl.constexpr,
                  PER_CHANNEL: tl.constexpr, HAS_BIAS: tl.constexpr,
                  HAS_POST: tl.constexpr, RES: tl.constexpr, RES_FIRST: tl.constexpr, ACT: tl.constexpr,
                  MID: tl.constexpr, OUT: tl.constexpr, OUT2: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr,
                  G: tl.constexpr, SPLIT: tl.constexpr, C_TMA: tl.constexpr = False,
                  FAST_ERF: tl.constexpr = False):
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BM, BN, G)
    if SPLIT:    # split-K: program (tile, s) sums K columns [s·KSPLIT, (s+1)·KSPLIT) into partials P[s]
        k_lo = tl.program_id(1) * KSPLIT
        k_hi = tl.minimum(k_lo + KSPLIT, K)
    else:
        k_lo = 0
        k_hi = K
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    if CONV:     # implicit GEMM: row m = (image, oh, ow), column k = (r, s, c) of the NCHW-indexed input A
        img = rm // OHW
        oh = (rm % OHW) // OW
        ow = (rm % OHW) % OW
        base_h, base_w = oh * sh - ph, ow * sw - pw
        x_row = A + img.to(tl.int64) * sxn
        x_pix = (base_h * sxh + base_w * sxw)[:, None]
    elif not TMA:
        a_ptr = A + rm[:, None].to(tl.int64) * s_am + (k_lo + rk)[None, :] * s_ak
    if not TMA:
        b_ptr = B + rn[None, :].to(tl.int64) * s_bn + (k_lo + rk)[:, None] * s_bk
    if TMA:      # A and B are tensor descriptors
        acc = _tma_acc(A, B, pid_m, pid_n, k_lo, k_hi, FP8, BM, BN, BK)
    else:
        acc = _zero_acc(FP8, BM, BN)
        for k in range(k_lo, k_hi, BK):
            b_mask = (rn[None, :] < N) & (rk[:, None] + k < k_hi)
            if CONV and TAP_ALIGNED:     # CIN % BK == 0: this K block is channels c0..c0+BK of one tap (r, s)
                tap = k // CIN
                ih = base_h + (tap // KW) * dh
                iw = base_w + (tap % KW) * dw
                inside = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W) & (rm < M)
                a_mask = tl.broadcast_to(inside[:, None], (BM, BK))
                a_at = (x_row + ih * sxh + iw * sxw)[:, None] + ((k - tap * CIN + rk) * sxc)[None, :]
            elif CONV:   # any C: column k's offset and tap displacement from the tap table (no division per element)
                kk = k + rk
                ih = base_h[:, None] + tl.load(Ktab + KT + kk)[None, :]
                iw = base_w[:, None] + tl.load(Ktab + 2 * KT + kk)[None, :]
                a_mask = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W) & (rm[:, None] < M)
                a_at = x_row[:, None] + x_pix + tl.load(Ktab + kk)[None, :]
            else:
                a_mask = (rm[:, None] < M) & (rk[None, :] + k < k_hi)
                a_at = a_ptr
            if FP8:
                a = tl.load(a_at, mask=a_mask, other=0.0)
                b = tl.load(b_ptr, mask=b_mask, other=0.0)
                acc = tl.dot(a, b, acc)
            else:
                if PAD_ZERO:     # zero-filled asynchronous copies: the main loop stays pipelined
                    a = tl.load(a_at, mask=a_mask, other=0)
                else:            # outside the image: the zero point (a real 0); a select in registers, not pipelined
                    a = tl.load(a_at, mask=a_mask, other=pad)
                if SHIFT:
                    a = (a.to(tl.int32) - 128).to(tl.int8)
                b = tl.load(b_ptr, mask=b_mask, other=0)
                acc = tl.dot(a, b, acc, out_dtype=tl.int32)
            if not CONV:
                a_ptr += BK * s_ak
            b_ptr += BK * s_bk
    if SPLIT:
        pmask = (rm[:, None] < M) & (rn[None, :] < N)
        tl.store(P + (tl.program_id(1) * M + rm[:, None]).to(tl.int64) * N + rn[None, :], acc, mask=pmask)
    else:
        _epilogue(acc, rm, rn, pid_m * BM, pid_n * BN, M, N, Wsum, Mult, Bias, Post, R, C, C2, s_rm, s_rn, s_cm,
                  s_cn, x_zp, alpha, beta, mid_scale, mid_r, mid_zp, mid_lo, mid_hi, res_scale, res_zp,
                  y_scale, y_r, y_zp, y_lo, y_hi, q2_scale, q2_r, q2_zp, q2_lo, q2_hi,
                  HAS_ZP, PER_CHANNEL, HAS_BIAS, HAS_POST, RES, RES_FIRST, ACT, MID, OUT, OUT2, C_TMA, FAST_ERF)


@triton.jit
def _qgemm_persistent_kernel(A, B, Wsum, Mult, Bias, Post, R, C, C2, M, N, K, s_rm, s_rn, s_cm, s_cn,
                             x_zp, alpha, beta, mid_scale, mid_r, mid_zp, mid_lo, mid_hi, res_scale, res_zp,
                             y_scale, y_r, y_zp, y_lo, y_hi, q2_scale, q2_r, q2_zp, q2_lo, q2_hi,
                             FP8: tl.constexpr, HAS_ZP: tl.constexpr, PER_CHANNEL: tl.constexpr,
                             HAS_BIAS: tl.constexpr, HAS_POST: tl.constexpr, RES: tl.constexpr,
                             RES_FIRST: tl.constexpr, ACT: tl.constexpr, MID: tl.constexpr, OUT: tl.constexpr,
                             OUT2: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                             G: tl.constexpr, NUM_SMS: tl.constexpr, C_TMA: tl.constexpr = False,
                             FAST_ERF: tl.constexpr = False):
    """The TMA main loop, persistent: NUM_SMS programs (one per multiprocessor) each walk the output tiles
    tile = pid, pid + NUM_SMS, … in grouped order, so a program's next tile's bulk copies are issued while this
    tile's epilogue runs, and no program is launched per tile. Same arithmetic per tile as _qgemm_kernel with
    TMA=1 (exact int32 sums, the same _epilogue), so the same bits; the same traffic, less launch and tail time."""
    num_tiles = tl.cdiv(M, BM) * tl.cdiv(N, BN)
    for tile in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = grouped_tile(tile, M, N, BM, BN, G)
        acc = _tma_acc(A, B, pid_m, pid_n, 0, K, FP8, BM, BN, BK)
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        _epilogue(acc, rm, rn, pid_m * BM, pid_n * BN, M, N, Wsum, Mult, Bias, Post, R, C, C2, s_rm, s_rn, s_cm,
                  s_cn, x_zp, alpha, beta, mid_scale, mid_r, mid_zp, mid_lo, mid_hi, res_scale, res_zp,
                  y_scale, y_r, y_zp, y_lo, y_hi, q2_scale, q2_r, q2_zp, q2_lo, q2_hi,
                  HAS_ZP, PER_CHANNEL, HAS_BIAS, HAS_POST, RES, RES_FIRST, ACT, MID, OUT, OUT2, C_TMA, FAST_ERF)


@triton.jit
def _splitk_reduce_kernel(P, S, MN, Wsum, Mult, Bias, Post, R, C, C2, M, N, s_rm, s_rn, s_cm, s_cn,
                          x_zp, alpha, beta, mid_scale, mid_r, mid_zp, mid_lo, mid_hi, res_scale, res_zp,
                          y_scale, y_r, y_zp, y_lo, y_hi, q2_scale, q2_r, q2_zp, q2_lo, q2_hi,
                          FP8: tl.constexpr, HAS_ZP: tl.constexpr, PER_CHANNEL: tl.constexpr, HAS_BIAS: tl.constexpr,
                          HAS_POST: tl.constexpr, RES: tl.constexpr, RES_FIRST: tl.constexpr, ACT: tl.constexpr,
                          MID: tl.constexpr, OUT: tl.constexpr, OUT2: tl.constexpr, BM: tl.constexpr,
                          BN: tl.constexpr, FAST_ERF: tl.constexpr = False):
    """Split-K's second pass: acc = Σ_s P[s] over the S partial (M, N) accumulators (int32 sums are exact in any
    order, so the result is bit for bit the unsplit kernel's; fp8's float32 partials differ by reassociation
    only), then the same epilogue. Reads 4·S bytes per output element, writes the outputs."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    at = P + rm[:, None].to(tl.int64) * N + rn[None, :]
    acc = _zero_acc(FP8, BM, BN)
    for s in range(0, S):
        acc += tl.load(at + s * MN, mask=mask, other=0)
    _epilogue(acc, rm, rn, 0, 0, M, N, Wsum, Mult, Bias, Post, R, C, C2, s_rm, s_rn, s_cm, s_cn,
              x_zp, alpha, beta, mid_scale, mid_r, mid_zp, mid_lo, mid_hi, res_scale, res_zp,
              y_scale, y_r, y_zp, y_lo, y_hi, q2_scale, q2_r, q2_zp, q2_lo, q2_hi,
              HAS_ZP, PER_CHANNEL, HAS_BIAS, HAS_POST, RES, RES_FIRST, ACT, MID, OUT, OUT2, False, FAST_ERF)


def _range(dtype_name: str) -> tuple[float, float]:
    return (0.0, 255.0) if dtype_name == "uint8" else (-128.0, 127.0)


def weight_sums(b8: torch.Tensor) -> torch.Tensor:
    """Σ_k B[n, k] as int32: the activation zero point's correction term, one value per output channel."""
    return b8.to(torch.int32).sum(1).to(torch.int32)


def tap_table(x: torch.Tensor, geom: dict, k: int, bk: int) -> torch.Tensor:
    """The implicit GEMM's column table for a convolution whose channel count is not a multiple of BK: for column
    k = (r·KW + s)·C + c, row 0 holds its address offset c·sxc + r·dh·sxh + s·dw·sxw, rows 1 and 2 its tap's
    displacement r·dh and s·dw (added to the output pixel's top-left input row and column for the bounds check).
    Columns are padded to a multiple of BK with a displacement of −2³⁰: always outside the image, so masked.
    3·K' int32 values, read from L1 once per K step instead of four integer divisions per loaded element."""
    c, kw = x.shape[1], geom["KW"]
    kp = -(-k // bk) * bk
    kk = torch.arange(kp, dtype=torch.int64)
    tap, ch = kk // c, kk % c
    dh, dw = geom["dilations"]
    r, s = (tap // kw) * dh, (tap % kw) * dw
    off = ch * x.stride(1) + r * x.stride(2) + s * x.stride(3)
    outside = kk >= k
    r, s, off = r.masked_fill(outside, -(1 << 30)), s.masked_fill(outside, -(1 << 30)), off.masked_fill(outside, 0)
    return torch.cat([off, r, s]).to(torch.int32).to(x.device)


def tma_operands(a8: torch.Tensor, b_padded: torch.Tensor, k: int, cfg: dict):
    """Tensor descriptors of A (M, K) and B (N, K) for the bulk-copy main loop. The hardware wants a unit last
    stride, row strides that are multiples of 16 bytes and a 16-byte aligned base; `b_padded` is the weight matrix
    with rows padded to 16 bytes (prepared once per weight), so only A can disqualify a call."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    if a8.stride(1) != 1 or a8.stride(0) % 16 or a8.data_ptr() % 16:
        raise ValueError(f"TMA needs A with unit column stride, 16-byte row stride and base; got strides "
                         f"{tuple(a8.stride())}")
    a_desc = TensorDescriptor(a8, [a8.shape[0], k], [a8.stride(0), 1], [cfg["BM"], cfg["BK"]])
    b_desc = TensorDescriptor(b_padded, [b_padded.shape[0], k], [b_padded.stride(0), 1], [cfg["BN"], cfg["BK"]])
    return a_desc, b_desc


def tma_output(out: torch.Tensor, cfg: dict):
    """A tensor descriptor of the (M, N) output in (BM, BN) blocks for the epilogue's bulk-copy store (configs
    marked CTMA: neither store path won everywhere on the H100, TMA_CONFIGS' note), or None
    where the hardware cannot take it (row stride not a multiple of 16 bytes, e.g. N = 1000 int8 classes; or a
    base not 16-byte aligned) or the output is float32 (untried: a 512-byte tile row): pointer stores then."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    size = out.element_size()
    if size > 2 or out.stride(1) != 1 or (out.stride(0) * size) % 16 or out.data_ptr() % 16:
        return None
    return TensorDescriptor(out, list(out.shape), [out.stride(0), 1], [cfg["BM"], cfg["BN"]])


def pad_rows16(b8: torch.Tensor) -> torch.Tensor:
    """B (N, K) in rows of ⌈K/16⌉·16 bytes (zeros beyond K), the layout tensor descriptors accept."""
    n, k = b8.shape
    out = torch.zeros((n, -(-k // 16) * 16), dtype=torch.uint8, device=b8.device)
    out[:, :k] = b8.view(torch.uint8)
    return out.view(b8.dtype)


REDUCE_TILE = (16, 64)      # split-K's second pass: small tiles, so that a handful of output tiles still fill the GPU


def launch(a8, b8, z8, w_zp, bias, res2, post, p, cfg, interpret=False, geom=None, wsum=None, ktab=None,
           b_tma=None):
    """Run the fused kernel on A (M, K), B (N, K) — or, with `geom` (quant_gemm.conv_geometry), on the raw
    convolution input as an implicit GEMM (`ktab`: its tap_table when C % BK ≠ 0); with cfg TMA=1, A and B
    (`b_tma`, B with 16-byte rows) go in as tensor descriptors; with cfg SPLIT=1 and a plan of S > 1 splits, two
    launches (partial sums, then the reduction and epilogue). Returns the (M, N) output in the layer's y_dtype."""
    from ..ir import dtype_from_name
    at = p.attrs
    n = b8.shape[0]
    if geom is None:
        m, k = a8.shape
        conv_args = [0] * 17
        sa = (a8.stride(0), a8.stride(1))
    else:
        m, k = geom["M"], b8.shape[1]
        x = a8
        pad_raw = geom["z_raw"]
        conv_args = [pad_raw, x.shape[2], x.shape[3], x.shape[1], geom["OW"], geom["OH"] * geom["OW"], geom["KW"],
                     *geom["strides"], geom["pads"][0], geom["pads"][1], *geom["dilations"],
                     x.stride(0), x.stride(2), x.stride(3), x.stride(1)]
        sa = (0, 0)
    aligned = geom is not None and conv_args[3] % cfg["BK"] == 0
    if geom is not None and not aligned and ktab is None:
        raise ValueError("an implicit convolution whose C is not a multiple of BK needs its tap_table")
    use_tma = bool(cfg.get("TMA"))
    a_arg, b_arg = a8, b8
    if use_tma:
        if geom is not None:
            raise ValueError("the TMA main loop is the explicit GEMM's (IMPLICIT=0)")
        if b_tma is None:
            raise ValueError("the TMA main loop needs the weights in 16-byte rows (pad_rows16)")
        if a8.is_cuda and torch.cuda.get_device_capability(a8.device) < (9, 0):
            raise ValueError("TMA (bulk tensor copies) needs compute capability 9.0 or newer")
        a_arg, b_arg = tma_operands(a8, b_tma, k, cfg)
    out = torch.empty((m, n), dtype=dtype_from_name(at["y_dtype"]), device=a8.device)
    fp8 = is_fp8(a8)
    if not (z8 and not fp8):
        wsum = out.new_empty(0, dtype=torch.int32)
    elif wsum is None:
        wsum = weight_sums(b8)
    mult = p.mult.to(a8.device)
    res_kind = 0 if res2 is None else (2 if at["residual_scale"] else 1)
    r = res2 if res2 is not None else out
    mid_kind = 0 if not at["mid_scale"] else _OUT_KIND[at["mid_dtype"]]
    mlo, mhi = _range(at["mid_dtype"])
    ylo, yhi = _range(at["y_dtype"])
    out2_kind = _OUT_KIND[at["out2_dtype"]] if at.get("out2_scale") and not at["y_scale"] else 0
    out2 = torch.empty((m, n), dtype=dtype_from_name(at["out2_dtype"]), device=a8.device) if out2_kind else out
    qlo, qhi = _range(at.get("out2_dtype", ""))
    opts = {} if interpret else {"num_warps": cfg["warps"], "num_stages": cfg["stages"], "enable_fp_fusion": False}
    # the epilogue's operands, scalars and switches: the same for the one-pass kernel and split-K's second pass
    epi_ptrs = (wsum, mult, bias if bias is not None else mult, post if post is not None else mult, r, out, out2)
    epi_scalars = (
        int(z8), float(at["alpha"]), float(at["beta"]),
        float(at["mid_scale"]), reciprocal_scale(at["mid_scale"]), float(at["mid_zero_point"]), mlo, mhi,
        float(at["residual_scale"]), float(at["residual_zero_point"]),
        float(at["y_scale"]), reciprocal_scale(at["y_scale"]), float(at["y_zero_point"]), ylo, yhi,
        float(at.get("out2_scale", 0.0)), reciprocal_scale(at.get("out2_scale", 0.0)),
        float(at.get("out2_zero_point", 0)), qlo, qhi)
    epi_consts = dict(HAS_ZP=bool(z8) and not fp8, PER_CHANNEL=mult.numel() > 1, HAS_BIAS=bias is not None,
                      HAS_POST=post is not None, RES=res_kind, RES_FIRST=bool(at["residual_first"]),
                      ACT=kernel_activation(at["activation"], at["alpha"]), MID=mid_kind,
                      OUT=_OUT_KIND.get(at["y_dtype"], 0) if at["y_scale"] else 0,
                      OUT2=out2_kind, FAST_ERF=cfg.get("ERF") == "fast")
    if cfg.get("PERSIST") and (not use_tma or cfg.get("SPLIT")):
        raise ValueError("the persistent main loop is the TMA one, without split-K")
    splits, ksplit = split_plan(m, n, k, cfg, sm_count(a8.device)) if cfg.get("SPLIT") else (1, k)
    c_arg = tma_output(out, cfg) if splits == 1 and cfg.get("CTMA") else None     # None: pointer stores
    out_ptrs = (*epi_ptrs[:5], out if c_arg is None else c_arg, out2)               # Wsum … Post, C, C2
    if cfg.get("PERSIST"):
        sms = sm_count(a8.device)
        _qgemm_persistent_kernel[(min(sms, output_tiles(m, n, cfg)),)](
            a_arg, b_arg, *out_ptrs, m, n, k, r.stride(0), r.stride(1), out.stride(0), out.stride(1),
            *epi_scalars, FP8=fp8, BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], G=cfg["G"], NUM_SMS=sms,
            C_TMA=c_arg is not None, **epi_consts, **opts)
        return (out, out2) if out2_kind else out
    partial = (out.new_empty((splits, m, n), dtype=torch.float32 if fp8 else torch.int32) if splits > 1
               else wsum)
    grid = (output_tiles(m, n, cfg), splits)
    _qgemm_kernel[grid](
        a_arg, b_arg, *out_ptrs, ktab if ktab is not None else wsum, ktab.numel() // 3 if ktab is not None else 0,
        partial, ksplit, m, n, k, *sa, b8.stride(0), b8.stride(1), r.stride(0), r.stride(1),
        out.stride(0), out.stride(1), *epi_scalars, *conv_args,
        CONV=geom is not None, TAP_ALIGNED=aligned, TMA=use_tma,
        PAD_ZERO=conv_args[0] == 0, SHIFT=geom is not None and a8.dtype == torch.uint8, FP8=fp8,
        BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], G=cfg["G"], SPLIT=splits > 1, C_TMA=c_arg is not None,
        **epi_consts, **opts)
    if splits > 1:
        rbm, rbn = REDUCE_TILE
        _splitk_reduce_kernel[(triton.cdiv(m, rbm), triton.cdiv(n, rbn))](
            partial, splits, m * n, *epi_ptrs, m, n, r.stride(0), r.stride(1), out.stride(0), out.stride(1),
            *epi_scalars, FP8=fp8, BM=rbm, BN=rbn, **epi_consts,
            **({} if interpret else {"num_warps": 4, "enable_fp_fusion": False}))
    return (out, out2) if out2_kind else out


def kernel_reason(layer) -> str | None:
    """Why the Triton kernel does not implement this layer (device aside)."""
    why = gemm_layer_reason(layer)
    if why:
        return why
    a = layer.attrs
    if a.get("w_zero_point"):
        return "asymmetric weights (w_zero_point ≠ 0): the Triton epilogue corrects the activation zero point only"
    if (a["y_scale"] or a.get("out2_scale")) and a["activation"] not in EXACT_ACTIVATIONS:
        return (f"{a['activation']} before a quantized output: the Triton activation is not bit-exact to the "
                f"reference (the builder checks int8 outputs exactly)")
    return None


def build_kernel(layer, cfg, device, interpret=False):
    # made once and reused while the operand they come from is the same (pointer, version / shape and strides):
    # the weight matrix's row sums and 16-byte-row copy, the convolution input's tap table
    prepared: dict = {}

    def once(kind, key, make):
        if prepared.get(kind, (None,))[0] != key:
            prepared[kind] = (key, make())
        return prepared[kind][1]

    def fused(a8, b8, z8, w_zp, bias, res2, post, p, geom=None):
        if w_zp is not None:
            raise ValueError(f"layer {layer.name!r}: uint8 weights (zero point 128) need the torch_int_mm tactic")
        wkey = (b8.data_ptr(), b8._version)
        wsum = once("wsum", wkey, lambda: weight_sums(b8)) if z8 and not is_fp8(b8) else None
        b_tma = once("b_tma", wkey, lambda: pad_rows16(b8)) if cfg.get("TMA") else None
        ktab = None
        if geom is not None and a8.shape[1] % cfg["BK"]:
            ktab = once("ktab", (tuple(a8.shape), a8.stride()),
                        lambda: tap_table(a8, geom, b8.shape[1], cfg["BK"]))
        return launch(a8, b8, z8, w_zp, bias, res2, post, p, cfg, interpret, geom, wsum, ktab, b_tma)
    return make_gemm_kernel(layer, device, None, fused_epilogue=fused, implicit_conv=bool(cfg.get("IMPLICIT")))


def _layer_activation(layer) -> str:
    """The kernel's ACT for a layer (kernel_activation of its activation and alpha)."""
    return kernel_activation(layer.attrs.get("activation", "none"), layer.attrs.get("alpha", 0.0))


def config_fits(layer, cfg, inputs) -> str | None:
    """Why a config is not worth compiling for this layer: the fast-erf GELU epilogue where the layer has no GELU,
    then split_fits (split-K and persistent configs at these shapes)."""
    act = _layer_activation(layer)
    if cfg.get("ERF") and act != "Gelu":
        return f"ERF={cfg['ERF']} is the erf GELU epilogue's; this layer's activation is {act}"
    return split_fits(layer, cfg, inputs)


FAST_ERF_CODE_FRACTION = 0.01
TANH_GELU_CODE_FRACTION = 0.01


def config_code_slack(layer, cfg) -> tuple[tuple[int, ...], float] | None:
    """The outputs a config may leave one code off the reference, and on what fraction of their elements at most:
    the fast-erf GELU (ERF=fast) on its quantized outputs (triton_gemm.gelu_fast: within 3.6e-7 of the exact GELU, so a code
    moves only where y/scale sits that close to a rounding boundary), and the tanh GELU (GPT-2's gelu_new) in any
    config: the kernel's x·σ(2u) = ½x(1 + tanh u) through exp differs from torch's tanhf by a few ulps. None:
    bit-exact, as every other config and activation."""
    if _layer_activation(layer) == "GeluTanh":
        return tuple(range(len(layer.outputs))), TANH_GELU_CODE_FRACTION
    if cfg.get("ERF") != "fast":
        return None
    return tuple(range(len(layer.outputs))), FAST_ERF_CODE_FRACTION


def _make(kind: str):
    class _Tactic:
        @staticmethod
        def supports(layer, device):
            why = triton_device_reason(device) or kernel_reason(layer)
            if why:
                return why
            is8 = layer.attrs["x_dtype"] == "float8_e4m3fn"
            if (kind == "fp8") != is8:
                return f"{layer.attrs['x_dtype']} activations: this is the {kind} kernel"
            if is8 and torch.cuda.get_device_capability(device) < (8, 9):
                return "fp8 tensor cores need compute capability 8.9 or newer"
            return None

        @staticmethod
        def build(layer, cfg, device):
            return build_kernel(layer, cfg, device)

        fits = staticmethod(config_fits)
        code_slack = staticmethod(config_code_slack)
    return _Tactic


# bulk tensor copies (TMA, sm_90+) for the explicit GEMM: the fastest main loop on 8 of 10 BERT/resnet50 shapes in
# bench/results/int8-ceiling-nvidia-h200.txt (the best pointer-load config there: 1.0–1.36x slower)
TMA_CONFIGS = [
    {"BM": 128, "BN": 128, "BK": 64, "G": 8, "stages": 4, "warps": 4, "TMA": 1},
    {"BM": 128, "BN": 128, "BK": 128, "G": 8, "stages": 3, "warps": 8, "TMA": 1},
    {"BM": 128, "BN": 64, "BK": 128, "G": 8, "stages": 4, "warps": 4, "TMA": 1},
    {"BM": 64, "BN": 128, "BK": 128, "G": 8, "stages": 4, "warps": 4, "TMA": 1},
    # the first, with its output tile written by one bulk copy (CTMA: tma_output). On BERT's GEMMs at batch 32
    # (H100, 2026-12-07, int8-ceiling "fused" forms) the bulk store won in this tile (FC1 + GELU 50.3 vs 52.0 µs)
    # and lost in others (FC2 in 128×128×128 s3 w8: 34.8 vs 26.6 µs), so it is a config the build times, not a rule
    {"BM": 128, "BN": 128, "BK": 64, "G": 8, "stages": 4, "warps": 4, "TMA": 1, "CTMA": 1},
    # and with GELU by the fast erf (ERF=fast: triton_gemm.gelu_fast), for GELU layers only (config_fits): BERT's FC1 + GELU
    # ran 50.3 µs in this tile against 27.1 µs for the bare loop, libdevice's erf being ~34 of the ~52 instructions
    # per element. Unmeasured on a GPU (no device time was left): the build times it beside the exact configs
    {"BM": 128, "BN": 128, "BK": 64, "G": 8, "stages": 4, "warps": 4, "TMA": 1, "CTMA": 1, "ERF": "fast"},
]
# the TMA main loop as a persistent kernel (one program per multiprocessor walking the tiles): the next tile's
# copies overlap this tile's epilogue; compiled only where there are more output tiles than multiprocessors
# (split_fits). 128×128×64 s4 w4 persistent was dropped: on the H100 it never came within 20 % of the best form on
# BERT's four GEMMs (FC1 + GELU: 100.9 vs 50.3 µs)
PERSISTENT_CONFIGS = [
    {"BM": 128, "BN": 128, "BK": 128, "G": 8, "stages": 3, "warps": 8, "TMA": 1, "PERSIST": 1},
]
# convolutions: the implicit GEMM in every config, and the explicit one (im2col, or the NHWC view of a 1×1
# convolution) with pointer loads, with TMA, and in a 64-wide TMA tile with short K steps for the C = 3 stem
CONV_CONFIGS = ([{**c, "IMPLICIT": 1} for c in CONFIGS] + [{**CONFIGS[0], "IMPLICIT": 0}]
                + [{**c, "IMPLICIT": 0} for c in TMA_CONFIGS + PERSISTENT_CONFIGS]
                + [{"BM": 128, "BN": 64, "BK": 32, "G": 8, "stages": 4, "warps": 4, "IMPLICIT": 0, "TMA": 1}])
# split-K (split_plan) for problems with fewer output tiles than multiprocessors — batch 1: resnet50's 14×14 and
# 7×7 stages (8–32 tiles of 64×64), BERT-base at 128 tokens (24–72): small tiles, each with its K range divided.
# Timed only where the plan splits (split_fits), so larger batches compile none of them.
SPLIT_CONFIGS = [{"BM": 64, "BN": 64, "BK": 128, "G": 8, "stages": 4, "warps": 4, "SPLIT": 1},
                 {"BM": 64, "BN": 128, "BK": 128, "G": 8, "stages": 4, "warps": 4, "TMA": 1, "SPLIT": 1}]
CONV_SPLIT_CONFIGS = [{**SPLIT_CONFIGS[0], "IMPLICIT": 1}, {**SPLIT_CONFIGS[1], "IMPLICIT": 0}]
for _op, _cfgs in zip(GEMM_OPS, (CONFIGS + TMA_CONFIGS + PERSISTENT_CONFIGS + SPLIT_CONFIGS, CONV_CONFIGS + CONV_SPLIT_CONFIGS)):
    tactic(_op, name="triton_int8", configs=_cfgs, priority=20)(_make("int8"))
    tactic(_op, name="triton_fp8", configs=_cfgs, priority=20)(_make("fp8"))
