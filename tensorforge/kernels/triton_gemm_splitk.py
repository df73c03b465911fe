"""Tactic: MatMulEpilogue with a 2-D weight as a split-K Triton GEMM, for products with few output tiles.

    P[s] = A[:, K_s] · B[K_s, :]   (float32, s = 0 … S−1, K_s = [s·KSPLIT, (s+1)·KSPLIT))
    out  = epi(scale · Σ_s P[s])    (bias, activation, residual: triton_gemm._epilogue_store)

A transformer at batch 1 multiplies 128 token rows: BERT-base's and GPT-2's projections have 24 (N = 768) to 96
(N = 3072) output tiles of 64 × 64 for an H100's 132 multiprocessors, and each tile walks K = 768 or 3072 alone,
so most multiprocessors idle while a few stream the weight (GPT-2's FC2 at 128 rows: 13.5 µs with cuBLAS for 4.7
MB of weight, ~1.4 µs of HBM time; bench/results/fc1-gelu-tactics-nvidia-h100-80gb-hbm3.txt). Here S programs
share each tile, each summing KSPLIT columns (a multiple of BK) into a float32 partial; a second launch adds the S
partials in order (deterministic) and runs the epilogue. S = quant_split.split_plan: ⌈SMs / tiles⌉, at most 16 and
the K blocks. Extra traffic: 8·S bytes per output element (partials written, then read; L2-resident at these
sizes) and one launch. The main loop is triton_gemm's: tensor descriptors where tma_reason allows (float16/bfloat16,
16-byte rows), pointers otherwise. A call whose plan is one split (another shape of a dynamic profile) runs the
one-pass kernel of the same tiles instead. Float32 accumulation; the sum is the one-pass kernel's reassociated by
split, so results match it within float32 rounding.
"""

import torch
import triton
import triton.language as tl

from .quant_split import sm_count, split_plan
from .registry import tactic
from .triton_gemm import (TritonGemmEpilogue, _epilogue_store, epilogue_runner, gemm_epilogue, grouped_tile,
                          kernel_activation, output_tiles, tma_descriptors, tma_reason)

CONFIGS = [{"BM": bm, "BN": 64, "BK": 64, "G": 1, "stages": 4, "warps": 4, "TMA": 1, "SPLIT": 1}
           for bm in (64, 128)]
REDUCE_BM, REDUCE_BN = 32, 128       # the second pass's tile: 4096 float32 per partial per program


@triton.jit
def _gemm_partial_kernel(A, B, P, M, N, K, KSPLIT, MN, s_am, s_ak, s_bk, s_bn, USE_TMA: tl.constexpr,
                         B_NK: tl.constexpr, PRECISION: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                         BK: tl.constexpr, G: tl.constexpr):
    """Program (tile, split s): P[s, rows, cols] (P[s] at s·MN, MN = M·N) = A[rows, K_s] · B[K_s, cols] in float32. USE_TMA: A and B are
    tensor descriptors (B (N, K) when B_NK, read as its transpose); otherwise pointers with strides. KSPLIT is a
    multiple of BK, so no K block straddles two splits; past K the descriptors read 0 and the pointers mask."""
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BM, BN, G)
    s = tl.program_id(1)
    k_lo = s * KSPLIT
    k_hi = tl.minimum(k_lo + KSPLIT, K)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    if USE_TMA:
        for k in range(k_lo, k_hi, BK):
            a = A.load([pid_m * BM, k])
            if B_NK:
                b = B.load([pid_n * BN, k]).T
            else:
                b = B.load([k, pid_n * BN])
            acc = tl.dot(a, b, acc)
    else:
        rk = tl.arange(0, BK)
        for k in range(k_lo, k_hi, BK):
            a = tl.load(A + rm[:, None].to(tl.int64) * s_am + (k + rk)[None, :] * s_ak,
                        mask=(rm[:, None] < M) & ((k + rk)[None, :] < k_hi), other=0.0)
            b = tl.load(B + (k + rk)[:, None] * s_bk + rn[None, :].to(tl.int64) * s_bn,
                        mask=((k + rk)[:, None] < k_hi) & (rn[None, :] < N), other=0.0)
            acc += tl.dot(a, b, input_precision=PRECISION)
    at = P + s.to(tl.int64) * MN + rm[:, None].to(tl.int64) * N + rn[None, :]
    tl.store(at, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _partials_epilogue_kernel(P, S, MN, Bias, R, C, M, N, s_rm, s_rn, s_cm, s_cn, scale, alpha, beta,
                              HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, RES_FIRST: tl.constexpr,
                              ACT: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    """Second pass: acc = Σ_{s < S} P[s] in order, then the one-pass kernel's epilogue and store. Reads 4·S bytes
    per output element, writes the output once."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    at = P + rm[:, None].to(tl.int64) * N + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for s in range(0, S):
        acc += tl.load(at + s * MN, mask=mask, other=0.0)
    _epilogue_store(acc, rm, rn, M, N, Bias, R, s_rm, s_rn, C, s_cm, s_cn, scale, alpha, beta, HAS_BIAS, HAS_RES,
                    RES_FIRST, ACT)


def gemm_splitk(a, b, bias=None, residual=None, scale=1.0, activation="none", alpha=0.0, beta=0.0,
                residual_first=0, cfg=None, allow_tf32=None):
    """epi(scale · a·b) for a (…, K) and a 2-D b (K, N) (a view: Bᵀ of a stored (N, K) weight is read as such),
    split along K as split_plan says; one split → triton_gemm.gemm_epilogue with the same tiles, one pass."""
    cfg = {**CONFIGS[0], **(cfg or {})}
    k, n = a.shape[-1], b.shape[-1]
    a2 = a.reshape(-1, k)
    m = a2.shape[0]
    splits, ksplit = split_plan(m, n, k, cfg, sm_count(a.device)) if m and n and k else (1, k)
    if splits <= 1:
        one_pass = {key: v for key, v in cfg.items() if key != "SPLIT"}
        return gemm_epilogue(a, b, bias, residual, 0, scale, activation, alpha, beta, residual_first, one_pass,
                             allow_tf32)
    act = kernel_activation(activation, alpha)
    out_shape = (*a.shape[:-1], n)
    c = torch.empty(out_shape, dtype=a.dtype, device=a.device)
    c2 = c.view(m, n)
    r2 = residual.expand(out_shape).reshape(m, n) if residual is not None else c2
    bias_v = bias.reshape(-1).expand(n).contiguous() if bias is not None else c2
    if allow_tf32 is None:
        allow_tf32 = torch.backends.cuda.matmul.allow_tf32
    precision = "tf32" if (a.dtype == torch.float32 and allow_tf32 and a.device.type == "cuda") else "ieee"
    partials = torch.empty((splits, m, n), dtype=torch.float32, device=a.device)
    use_tma = bool(cfg.get("TMA")) and tma_reason(a2, b) is None
    if use_tma:
        a_arg, b_arg, b_nk = tma_descriptors(a2, b, cfg)
    else:
        a_arg, b_arg, b_nk = a2, b, False
    _gemm_partial_kernel[(output_tiles(m, n, cfg), splits)](
        a_arg, b_arg, partials, m, n, k, ksplit, m * n, *a2.stride(), *b.stride(), USE_TMA=use_tma, B_NK=b_nk,
        PRECISION=precision, BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], G=cfg["G"], num_warps=cfg["warps"],
        num_stages=cfg["stages"])
    _partials_epilogue_kernel[(triton.cdiv(m, REDUCE_BM), triton.cdiv(n, REDUCE_BN))](
        partials, splits, m * n, bias_v, r2, c2, m, n, *r2.stride(), *c2.stride(), float(scale), float(alpha),
        float(beta),
        HAS_BIAS=bias is not None, HAS_RES=residual is not None, RES_FIRST=bool(residual_first), ACT=act,
        BM=REDUCE_BM, BN=REDUCE_BN, num_warps=4)
    return c


@tactic("MatMulEpilogue", name="triton_gemm_splitk", configs=CONFIGS, priority=0)
class TritonGemmSplitK:
    """Below triton_gemm (priority 1): untimed builds never pick it; timed builds compare it at the shapes where
    fits() lets it in."""
    supports = staticmethod(TritonGemmEpilogue.supports)

    @staticmethod
    def fits(layer, cfg, inputs):
        """A 2-D weight, and a split plan of more than one split at these shapes (else it is the one-pass
        kernel of the same tiles, timed as triton_gemm)."""
        a, b = inputs[0], inputs[1] if len(inputs) > 1 else None
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            return None
        if b.dim() != 2:
            return f"B is {b.dim()}-D: split-K takes a 2-D weight"
        if a.dim() < 1 or not a.numel():
            return "A is empty"
        m, k = a.numel() // a.shape[-1], a.shape[-1]
        n = b.shape[0] if layer.attrs.get("trans_b", 0) else b.shape[1]
        sms = sm_count(a.device)
        if split_plan(m, n, k, cfg, sms)[0] <= 1:
            return f"split-K not needed: {output_tiles(m, n, cfg)} output tiles for {sms} multiprocessors"
        return None

    @staticmethod
    def build(layer, cfg, device):
        return epilogue_runner(layer, lambda a, b, bias, residual, *epi: gemm_splitk(a, b, bias, residual, *epi,
                                                                                     cfg=cfg))
