"""im2col of a quantized (int8/uint8) 2-D convolution input in one Triton pass, for the explicit-GEMM form of
QuantizedConv on CUDA (quant_gemm.make_gemm_kernel): replaces quant_common.im2col's three torch kernels (a fill
of the padded NHWC copy, the strided copy into it, the strided gather into the matrix) — the stem convolution of a
ResNet (C = 3, K = 147) spends about as long in those copies as in its GEMM.

    A[m, k] = x[n, c, oh·sh − ph + r·dh, ow·sw − pw + s·dw]   (pad_value outside the image: the zero point)
    m = (n·OH + oh)·OW + ow,   k = (r·KW + s)·C + c            (quant_common.im2col's (kh, kw, C) order)
Rows are `row_stride` ≥ K bytes apart (K rounded up to 16 by the GEMM tactic, so every row starts 16-byte aligned;
the pad columns are never read: the GEMM masks k ≥ K). Traffic: x read from L2 once per tap, A written once.
Entry point: `im2col_int8(x, w_shape, attrs, pad_value, row_stride=None, shift=False)` → (A (M, K) view, (N, OH, OW)).
"""

import torch
import triton
import triton.language as tl

_BM, _BK = 64, 64


@triton.jit
def _im2col_kernel(X, A, M, K, C, H, W, OH, OW, KW, sxn, sxc, sxh, sxw, sh, sw, ph, pw, dh, dw, pad, s_am,
                   SHIFT: tl.constexpr, BM: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rk = tl.program_id(1) * BK + tl.arange(0, BK)
    n = rm // (OH * OW)
    oh = (rm % (OH * OW)) // OW
    ow = rm % OW
    tap = rk // C
    c = rk % C
    ih = (oh * sh - ph)[:, None] + ((tap // KW) * dh)[None, :]
    iw = (ow * sw - pw)[:, None] + ((tap % KW) * dw)[None, :]
    ok = (rm < M)[:, None] & (rk < K)[None, :]
    inside = ok & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
    src = X + n.to(tl.int64)[:, None] * sxn + (c * sxc)[None, :] + ih * sxh + iw * sxw
    v = tl.load(src, mask=inside, other=0).to(tl.int32)
    if SHIFT:                      # uint8 codes → int8 (x − 128), as quant_common.as_int8
        v = v - 128
    v = tl.where(inside, v, pad)
    tl.store(A + rm.to(tl.int64)[:, None] * s_am + rk[None, :], v.to(A.dtype.element_ty), mask=ok)


def im2col_int8(x: torch.Tensor, w_shape, attrs: dict, pad_value: int, row_stride: int | None = None,
                shift: bool = False):
    """A for x; `shift` (uint8 x only) writes int8 codes x − 128; `pad_value` is in the output's codes."""
    if x.dtype not in (torch.int8, torch.uint8) or x.dim() != 4:
        raise ValueError(f"im2col_int8 takes a 4-D int8/uint8 tensor, got {x.dim()}-D {x.dtype}")
    n, c, h, w = x.shape
    kh, kw = int(w_shape[2]), int(w_shape[3])
    sh, sw = attrs.get("strides") or (1, 1)
    dh, dw = attrs.get("dilations") or (1, 1)
    p = attrs.get("pads") or (0, 0, 0, 0)
    oh = (h + p[0] + p[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (w + p[1] + p[3] - dw * (kw - 1) - 1) // sw + 1
    m, k = n * oh * ow, kh * kw * c
    stride = max(k, row_stride or k)
    shift = shift and x.dtype == torch.uint8
    a = torch.empty((m, stride), dtype=torch.int8 if shift else x.dtype, device=x.device)
    if m and k:
        grid = (triton.cdiv(m, _BM), triton.cdiv(k, _BK))
        _im2col_kernel[grid](x, a, m, k, c, h, w, oh, ow, kw, x.stride(0), x.stride(1), x.stride(2), x.stride(3),
                             sh, sw, p[0], p[1], dh, dw, int(pad_value), stride, SHIFT=shift,
                             BM=_BM, BK=_BK)
    return a[:, :k], (n, oh, ow)
