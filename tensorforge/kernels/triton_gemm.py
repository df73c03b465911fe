"""Tactic: MatMulEpilogue as a hand-written Triton GEMM whose epilogue (scale, bias, activation, residual) runs
on the accumulator in registers.

out[b] = epi(scale · A[b] · B[b]),  A (…, M, K), B (K, N) or (…, K, N) (Bᵀ read through strides when trans_b).
A 2-D B (the usual weight) folds A's leading dims into M: one (M·…, K)·(K, N) product. Tiles of
BLOCK_M × BLOCK_N accumulate in float32 over BLOCK_K steps (TF32 for float32 inputs when the build allows it,
tensor cores for float16/bfloat16); programs are grouped GROUP_M tiles down a column so neighbouring programs
share B tiles in L2. Traffic: A and B once per tile row/column pass, bias N, residual M·N, out M·N — the
unfused graph also writes and re-reads M·N once per epilogue op.
TMA=1 (TMA_CONFIGS; float16/bfloat16, 2-D B, operands as tma_reason accepts): A (M, K) and the weight as stored —
(N, K) with trans_b, read as its transpose, or (K, N) — arrive as tensor descriptors, one bulk tensor copy each per
K step (out-of-bounds rows and columns read as 0: no addresses or masks in the main loop); the epilogue and its
store are the pointer kernel's (_epilogue_store). Calls the descriptors cannot take run the pointer loop instead.
PERSIST=1 (PERSISTENT_CONFIGS, with TMA=1): the same loop in one program per multiprocessor walking the tiles.
"""

import torch
import triton
import triton.language as tl

from ..util import device as _device
from ..util.log import get_logger
from .registry import tactic, triton_device_reason
from .torch_fused import epilogue_operands, rows_in_memory_order

CONFIGS = [
    {"BM": 128, "BN": 128, "BK": 32, "G": 8, "stages": 3, "warps": 8},
    {"BM": 128, "BN": 64, "BK": 32, "G": 8, "stages": 4, "warps": 4},
    {"BM": 64, "BN": 128, "BK": 32, "G": 8, "stages": 4, "warps": 4},
    {"BM": 64, "BN": 64, "BK": 32, "G": 8, "stages": 4, "warps": 4},
    {"BM": 128, "BN": 256, "BK": 64, "G": 8, "stages": 3, "warps": 8},
    {"BM": 64, "BN": 32, "BK": 32, "G": 8, "stages": 5, "warps": 2},
    # skinny products (batch-1 fully connected layers, squeeze-excite): one 16-row tile, long K steps; only for
    # products of at most SKINNY_ROWS rows (TritonGemmEpilogue.fits)
    {"BM": 16, "BN": 32, "BK": 128, "G": 1, "stages": 3, "warps": 4},
    {"BM": 16, "BN": 16, "BK": 256, "G": 1, "stages": 3, "warps": 4},
    {"BM": 16, "BN": 64, "BK": 64, "G": 1, "stages": 3, "warps": 4},
]
# float16/bfloat16 products with A and a 2-D B readable as tensor descriptors (tma_reason): bulk tensor copies in
# K steps of 64 (128 bytes, one swizzled shared-memory row); Hopper-sized tiles, ≤ 147 KB of stages in fp16
TMA_CONFIGS = [
    {"BM": 128, "BN": 128, "BK": 64, "G": 8, "stages": 4, "warps": 8, "TMA": 1},
    {"BM": 128, "BN": 256, "BK": 64, "G": 8, "stages": 3, "warps": 8, "TMA": 1},
    {"BM": 64, "BN": 128, "BK": 64, "G": 8, "stages": 4, "warps": 4, "TMA": 1},
    {"BM": 128, "BN": 64, "BK": 64, "G": 8, "stages": 4, "warps": 4, "TMA": 1},
]
# the tensor-descriptor loop as a persistent kernel: one program per multiprocessor walks the output tiles, the
# next tile's bulk copies overlapping this tile's epilogue; only where the tiles outnumber the multiprocessors
PERSISTENT_CONFIGS = [
    {"BM": 128, "BN": 256, "BK": 64, "G": 8, "stages": 3, "warps": 8, "TMA": 1, "PERSIST": 1},
    {"BM": 128, "BN": 128, "BK": 64, "G": 8, "stages": 4, "warps": 8, "TMA": 1, "PERSIST": 1},
]
# the erf GELU by gelu_fast (ERF=fast), for layers whose activation is the erf GELU only (fits): the exact erf
# took a Triton GEMM + GELU past torch's addmm + GELU kernel (ViT-B/16 FC1 at batch 32 on an H100: 88.1 against
# 81.2 µs, bench/results/fc1-gelu-tactics-nvidia-h100-80gb-hbm3.txt); in the INT8 kernel the fast erf took BERT's
# FC1 + GELU from 52.1 to 42.0 µs
FAST_ERF_CONFIGS = [{**TMA_CONFIGS[1], "ERF": "fast"}, {**TMA_CONFIGS[0], "ERF": "fast"}]
INTERPRETED_SMS = 8     # the "device" a persistent grid is sized for under TRITON_INTERPRET=1 (CPU tests)
SKINNY_ROWS = 64
ACTIVATIONS = ("none", "Relu", "Sigmoid", "Tanh", "LeakyRelu", "Clip", "HardSigmoid", "HardSwish", "Gelu", "GeluTanh",
               "Silu", "Elu")


def kernel_activation(activation: str, alpha: float) -> str:
    """The ACT switch of apply_activation for a layer's (activation, alpha): Gelu with alpha = 1 is the tanh form
    (ir.ops.fused.apply_activation), which the kernels compute as GeluTanh."""
    return "GeluTanh" if activation == "Gelu" and float(alpha) == 1.0 else activation


@triton.jit
def gelu_fast(y):
    """0.5·y·(1 + erf(y/√2)) with erf by Abramowitz & Stegun 7.1.26: for a = |y|/√2, t = 1/(1 + p·a) and
    erf(a) = 1 − t·P(t)·e^(−a²), P of degree 4 (Horner, explicit FMAs); t as rsqrt(1 + p·a)² and e^(−a²) as ex2
    (one MUFU each). Error: within 4.7e-7 of the exact GELU (float32, numpy, 2M points over [−12, 12]). The sm_90
    SASS of the 128×128 int8 tile kernel (8 warps): 2584 instructions against 3352 with libdevice's erf and 1336
    without an activation. Not bit-exact with torch's erf: a quantized output may land one code off where y/scale
    sits within ~1e-5 of a rounding boundary, which the builder accepts for these configs only (ERF=fast,
    triton_int8_gemm.config_code_slack); a float16 output is ~2000× coarser than the error (half an ulp at 1 is
    4.9e-4), a float32 one within the builder's float tolerance. Shared by the quantized GEMM (quant_math._act)
    and this file's ERF=fast configs (ACT "GeluFast")."""
    a = tl.abs(y) * 0.7071067811865476
    r = tl.math.rsqrt(tl.fma(a, 0.3275911, 1.0))
    t = r * r
    poly = tl.fma(tl.fma(tl.fma(tl.fma(t, 1.061405429, -1.453152027), t, 1.421413741), t, -0.284496736), t,
                  0.254829592) * t
    e = tl.fma(-poly, tl.exp2((y * y) * -0.7213475204444817), 1.0)      # e^(−y²/2) = 2^(−y²·log2(e)/2)
    h = 0.5 * y
    return tl.fma(h, tl.where(y < 0, -e, e), h)


@triton.jit
def apply_activation(y, ACT: tl.constexpr, alpha, beta):
    """The epilogue activations of ir.ops.fused.apply_activation, on a float32 tile; "GeluFast" is the erf GELU
    with gelu_fast's erf (the ERF=fast configs of a GELU layer)."""
    if ACT == "Relu":
        y = tl.where(y < 0, 0.0, y)
    elif ACT == "Sigmoid":
        y = tl.sigmoid(y)
    elif ACT == "Tanh":
        y = 2.0 * tl.sigmoid(2.0 * y) - 1.0
    elif ACT == "LeakyRelu":
        y = tl.where(y > 0, y, y * alpha)
    elif ACT == "Clip":
        y = tl.minimum(tl.maximum(y, alpha), beta)
    elif ACT == "HardSigmoid":
        y = tl.minimum(tl.maximum(alpha * y + beta, 0.0), 1.0)
    elif ACT == "HardSwish":
        y = y * tl.minimum(tl.maximum(y / 6.0 + 0.5, 0.0), 1.0)
    elif ACT == "Gelu":
        y = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))
    elif ACT == "GeluFast":
        y = gelu_fast(y)
    elif ACT == "GeluTanh":
        y = y / (1.0 + tl.exp(-1.5957691216057308 * (y + 0.044715 * y * y * y)))
    elif ACT == "Silu":
        y = y * tl.sigmoid(y)
    elif ACT == "Elu":
        y = tl.where(y > 0, y, alpha * (tl.exp(y) - 1.0))
    return y


@triton.jit
def residual_activation(v, r, ACT: tl.constexpr, alpha, beta, HAS_RES: tl.constexpr, RES_FIRST: tl.constexpr):
    """act(v + r) (RES_FIRST) or act(v) + r, on float32 tiles: the epilogue order of MatMulEpilogue / FusedConv;
    r is not read without HAS_RES. Shared by the GEMM, the conv epilogue, the conv pool and the depthwise kernel."""
    if HAS_RES:
        if RES_FIRST:
            v += r
    v = apply_activation(v, ACT, alpha, beta)
    if HAS_RES:
        if not RES_FIRST:
            v += r
    return v


@triton.jit
def grouped_tile(pid, M, N, BM: tl.constexpr, BN: tl.constexpr, G: tl.constexpr):
    """Program `pid` → its (row tile, column tile), G row tiles at a time: the G programs that share a column tile
    run together, so that tile of B is read from L2 rather than HBM (grouped launch order)."""
    num_m, num_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    per_group = G * num_n
    first_m = (pid // per_group) * G
    rows = tl.minimum(num_m - first_m, G)
    return first_m + (pid % per_group) % rows, (pid % per_group) // rows


@triton.jit
def _epilogue_store(acc, rm, rn, M, N, Bias, R, s_rm, s_rn, C, s_cm, s_cn, scale, alpha, beta,
                    HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, RES_FIRST: tl.constexpr, ACT: tl.constexpr):
    """C[rm, rn] = epi(scale · acc): + bias[rn], then the activation with the residual R[rm, rn] added before it
    (RES_FIRST) or after; rows ≥ M and columns ≥ N are neither read nor written. R and C point at this batch's
    matrices. Shared by the pointer and the tensor-descriptor main loops."""
    y = acc * scale
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    if HAS_BIAS:
        y += tl.load(Bias + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    res = 0.0
    if HAS_RES:
        res = tl.load(R + rm[:, None].to(tl.int64) * s_rm + rn[None, :] * s_rn, mask=mask, other=0.0).to(tl.float32)
    y = residual_activation(y, res, ACT, alpha, beta, HAS_RES, RES_FIRST)
    tl.store(C + rm[:, None].to(tl.int64) * s_cm + rn[None, :] * s_cn, y.to(C.dtype.element_ty), mask=mask)


@triton.jit
def _gemm_kernel(A, B, Bias, R, C, M, N, K, s_ab, s_am, s_ak, s_bb, s_bk, s_bn, s_rb, s_rm, s_rn, s_cb, s_cm, s_cn,
                 scale, alpha, beta, HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, RES_FIRST: tl.constexpr,
                 ACT: tl.constexpr, PRECISION: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                 G: tl.constexpr):
    batch = tl.program_id(1).to(tl.int64)
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BM, BN, G)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = A + batch * s_ab + rm[:, None].to(tl.int64) * s_am + rk[None, :] * s_ak
    b_ptrs = B + batch * s_bb + rk[:, None] * s_bk + rn[None, :].to(tl.int64) * s_bn
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k < K), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] + k < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision=PRECISION)
        a_ptrs += BK * s_ak
        b_ptrs += BK * s_bk
    _epilogue_store(acc, rm, rn, M, N, Bias, R + batch * s_rb, s_rm, s_rn, C + batch * s_cb, s_cm, s_cn, scale,
                    alpha, beta, HAS_BIAS, HAS_RES, RES_FIRST, ACT)


@triton.jit
def _tma_tile(A, B, pid_m, pid_n, M, N, K, Bias, R, s_rm, s_rn, C, s_cm, s_cn, scale, alpha, beta,
              HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, RES_FIRST: tl.constexpr, ACT: tl.constexpr,
              B_NK: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """One (BM, BN) output tile from tensor descriptors A (M, K) and B — (N, K) when B_NK, read as its transpose,
    else (K, N): two bulk copies per K step into a float32 accumulator, then the epilogue and the store."""
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, K, BK):
        a = A.load([pid_m * BM, k])
        if B_NK:
            b = B.load([pid_n * BN, k]).T
        else:
            b = B.load([k, pid_n * BN])
        acc = tl.dot(a, b, acc)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    _epilogue_store(acc, rm, rn, M, N, Bias, R, s_rm, s_rn, C, s_cm, s_cn, scale, alpha, beta, HAS_BIAS, HAS_RES,
                    RES_FIRST, ACT)


@triton.jit
def _gemm_tma_kernel(A, B, Bias, R, C, M, N, K, s_rm, s_rn, s_cm, s_cn, scale, alpha, beta, HAS_BIAS: tl.constexpr,
                     HAS_RES: tl.constexpr, RES_FIRST: tl.constexpr, ACT: tl.constexpr, B_NK: tl.constexpr,
                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, G: tl.constexpr):
    """_gemm_kernel's 2-D product with A (M, K) and B — (N, K) when B_NK (a transposed weight, read as its
    transpose), else (K, N) — as tensor descriptors: each K step is two bulk tensor copies into shared memory,
    rows and columns past the edges read as 0, so the main loop has no addresses or masks."""
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BM, BN, G)
    _tma_tile(A, B, pid_m, pid_n, M, N, K, Bias, R, s_rm, s_rn, C, s_cm, s_cn, scale, alpha, beta, HAS_BIAS,
              HAS_RES, RES_FIRST, ACT, B_NK, BM, BN, BK)


@triton.jit
def _gemm_tma_persistent_kernel(A, B, Bias, R, C, M, N, K, s_rm, s_rn, s_cm, s_cn, scale, alpha, beta,
                                HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, RES_FIRST: tl.constexpr,
                                ACT: tl.constexpr, B_NK: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                                BK: tl.constexpr, G: tl.constexpr, NUM_SMS: tl.constexpr):
    """_gemm_tma_kernel, persistent: NUM_SMS programs each take tiles pid, pid + NUM_SMS, … in grouped order, so
    the next tile's bulk copies are issued while this tile's epilogue runs and no program is launched per tile.
    Per tile the same products in the same order and the same epilogue: the same bits as _gemm_tma_kernel."""
    num_tiles = tl.cdiv(M, BM) * tl.cdiv(N, BN)
    for tile in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = grouped_tile(tile, M, N, BM, BN, G)
        _tma_tile(A, B, pid_m, pid_n, M, N, K, Bias, R, s_rm, s_rn, C, s_cm, s_cn, scale, alpha, beta, HAS_BIAS,
                  HAS_RES, RES_FIRST, ACT, B_NK, BM, BN, BK)


def _sms(device) -> int:
    """Multiprocessors the persistent grid fills: the CUDA device's, INTERPRETED_SMS under the interpreter."""
    return _device.sm_count(device, INTERPRETED_SMS)


def output_tiles(m: int, n: int, cfg: dict) -> int:
    """⌈m/BM⌉·⌈n/BN⌉: the output tiles of an (m, n) product in cfg's tiles."""
    return triton.cdiv(m, cfg["BM"]) * triton.cdiv(n, cfg["BN"])


def persistent_reason(m: int, n: int, cfg: dict, sms: int) -> str | None:
    """Why a persistent config (one program per multiprocessor walking the tiles) is not worth compiling for an
    (m, n) output: no more tiles than multiprocessors, so each program takes one tile — the one-tile kernel's work.
    Shared by the fp16 GEMM and the quantized one (quant_split.split_fits)."""
    tiles = output_tiles(m, n, cfg)
    return f"persistent loop not needed: {tiles} output tiles for {sms} multiprocessors" if tiles <= sms else None


def _b_stored(b_kn):
    """B (K, N) — a view, Bᵀ of a stored (N, K) weight when trans_b — as the matrix in memory with unit column
    stride, and whether that is (N, K)."""
    return (b_kn.T, True) if b_kn.stride(-1) != 1 else (b_kn, False)


def tma_reason(a2, b_kn) -> str | None:
    """Why A (M, K) and B (K, N) as they lie in memory cannot be tensor descriptors (None when they can): the
    bulk tensor copy wants float16/bfloat16 here (float32 stays on the pointer loop), a 2-D B, unit column stride,
    row strides that are multiples of 16 bytes and 16-byte aligned bases; on CUDA, compute capability 9.0+."""
    if a2.dtype not in (torch.float16, torch.bfloat16) or b_kn.dtype != a2.dtype:
        return f"{a2.dtype}×{b_kn.dtype} operands: the tensor-descriptor loop is for float16/bfloat16 (one dtype)"
    if b_kn.dim() != 2:
        return f"B is {b_kn.dim()}-D: batched products take the pointer main loop"
    if a2.is_cuda and torch.cuda.get_device_capability(a2.device) < (9, 0):
        return "bulk tensor copies (TMA) need compute capability 9.0 or newer"
    if not (a2.numel() and b_kn.numel()):
        return "an empty operand"
    for name, t in (("A", a2), ("B" if b_kn.stride(-1) == 1 else "Bᵀ (the stored weight)", _b_stored(b_kn)[0])):
        if t.stride(-1) != 1:
            return f"{name} has column stride {t.stride(-1)}, not 1"
        if t.stride(0) * t.element_size() % 16:
            return f"{name}'s row stride ({t.stride(0)} elements) is not a multiple of 16 bytes"
        if t.data_ptr() % 16:
            return f"{name}'s base address is not 16-byte aligned"
    return None


def tma_descriptors(a2, b_kn, cfg):
    """Host-side tensor descriptors of A (block BM × BK) and of B as stored: (N, K) in BN × BK blocks (read as
    their transpose) or (K, N) in BK × BN blocks. Returns (A's, B's, whether B is (N, K))."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    b_mem, b_nk = _b_stored(b_kn)
    a_desc = TensorDescriptor(a2, list(a2.shape), list(a2.stride()), [cfg["BM"], cfg["BK"]])
    block = [cfg["BN"], cfg["BK"]] if b_nk else [cfg["BK"], cfg["BN"]]
    return a_desc, TensorDescriptor(b_mem, list(b_mem.shape), list(b_mem.stride()), block), b_nk


def gemm_epilogue(a, b, bias=None, residual=None, trans_b=0, scale=1.0, activation="none", alpha=0.0, beta=0.0,
                  residual_first=0, cfg=None, allow_tf32=None):
    """MatMulEpilogue through the Triton kernel (launcher shared by the tactic and tests)."""
    cfg = {**CONFIGS[3], **(cfg or {})}
    activation = kernel_activation(activation, alpha)
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown epilogue activation {activation!r}")
    if cfg.get("ERF") == "fast" and activation == "Gelu":
        activation = "GeluFast"
    if trans_b:
        b = b.transpose(-1, -2)
    k, n = a.shape[-1], b.shape[-1]
    if b.dim() == 2:
        a3 = a.reshape(1, -1, k)
        b3 = b.unsqueeze(0)
        out_shape = (*a.shape[:-1], n)
    else:
        batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a3 = a.expand(*batch, *a.shape[-2:]).reshape(-1, *a.shape[-2:])
        b3 = b.expand(*batch, *b.shape[-2:]).reshape(-1, *b.shape[-2:])
        out_shape = (*batch, a.shape[-2], n)
    m, nb = a3.shape[1], a3.shape[0]
    c = torch.empty(out_shape, dtype=a.dtype, device=a.device)
    c3 = c.reshape(nb, m, n)
    r3 = residual.expand(out_shape).reshape(nb, m, n) if residual is not None else c3
    bias_v = bias.reshape(-1).expand(n).contiguous() if bias is not None else c3
    if m == 0 or n == 0:
        return c
    if allow_tf32 is None:
        allow_tf32 = torch.backends.cuda.matmul.allow_tf32
    precision = "tf32" if (a.dtype == torch.float32 and allow_tf32 and a.device.type == "cuda") else "ieee"
    grid = (output_tiles(m, n, cfg), nb)
    if cfg.get("TMA"):
        why = tma_reason(a3[0], b)
        if why is None:
            a_desc, b_desc, b_nk = tma_descriptors(a3[0], b, cfg)
            kernel, tma_grid, extra = _gemm_tma_kernel, grid, {}
            if cfg.get("PERSIST"):      # one program per multiprocessor (at most one per tile) walks the tiles
                sms = _sms(a.device)
                kernel, tma_grid, extra = _gemm_tma_persistent_kernel, (min(sms, grid[0]),), {"NUM_SMS": sms}
            kernel[tma_grid](a_desc, b_desc, bias_v, r3[0], c3[0], m, n, k, *r3[0].stride(), *c3[0].stride(),
                             float(scale), float(alpha), float(beta), HAS_BIAS=bias is not None,
                             HAS_RES=residual is not None, RES_FIRST=bool(residual_first), ACT=activation,
                             B_NK=b_nk, BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], G=cfg["G"],
                             num_warps=cfg["warps"], num_stages=cfg["stages"], **extra)
            return c
        log = get_logger()      # e.g. a misaligned view at a shape other than the opt point's, where fits() judged
        if log.is_verbose:
            log.verbose(f"triton_gemm TMA config on A {tuple(a3[0].shape)}: pointer main loop instead ({why})")
    _gemm_kernel[grid](a3, b3, bias_v, r3, c3, m, n, k, *a3.stride(), *b3.stride(), *r3.stride(), *c3.stride(),
                       float(scale), float(alpha), float(beta), HAS_BIAS=bias is not None,
                       HAS_RES=residual is not None, RES_FIRST=bool(residual_first), ACT=activation,
                       PRECISION=precision, BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], G=cfg["G"],
                       num_warps=cfg["warps"], num_stages=cfg["stages"])
    return c


@tactic("MatMulEpilogue", name="triton_gemm", configs=CONFIGS + TMA_CONFIGS + PERSISTENT_CONFIGS + FAST_ERF_CONFIGS,
        priority=1)
class TritonGemmEpilogue:
    @staticmethod
    def supports(layer, device):
        why = triton_device_reason(device)
        if why is not None:
            return why
        if layer.attrs.get("activation", "none") not in ACTIVATIONS:
            return f"activation {layer.attrs.get('activation')!r} has no Triton epilogue"
        return None

    @staticmethod
    def fits(layer, cfg, inputs):
        """16-row tiles re-read the weight once per 16 rows: above SKINNY_ROWS rows a 64-row tile reads it 4× less
        (on an H200, with these configs open to every GEMM, ConvNeXt-T at batch 1 picked them for its 196-row
        GEMMs by isolated timing and its GEMM kernels took 216 µs per inference in the network, kernel profile).
        TMA configs need operands that tensor descriptors can read (tma_reason). A is judged on the strides of its
        leading dims of size > 1, any of which may become the row stride of the (M, K) view the launch takes: all
        16-byte multiples is sufficient (conservative where the launch would copy A). A call that does not meet
        the conditions at run time (another shape or view) takes the pointer main loop with the same tiles. ERF=fast
        configs are for erf-GELU layers only."""
        if cfg.get("ERF"):
            act = kernel_activation(layer.attrs.get("activation", "none"), layer.attrs.get("alpha", 0.0)) \
                if layer is not None else "none"
            if act != "Gelu":
                return f"ERF={cfg['ERF']} is the erf GELU epilogue's; this layer's activation is {act}"
        a = inputs[0]
        rows = a.numel() // a.shape[-1] if isinstance(a, torch.Tensor) and a.dim() and a.shape[-1] else 0
        if cfg.get("BM", 64) <= 16 and rows > SKINNY_ROWS:
            return f"16-row tiles are for products of at most {SKINNY_ROWS} rows (this one has {rows})"
        if cfg.get("TMA") and len(inputs) > 1 and isinstance(a, torch.Tensor) and isinstance(inputs[1], torch.Tensor):
            b = inputs[1]
            if b.dim() >= 2 and (layer.attrs.get("trans_b", 0) if layer is not None else 0):
                b = b.transpose(-1, -2)
            if a.dim() < 2 or not a.numel():
                return "A is not a non-empty matrix"
            lead = [st for size, st in zip(a.shape[:-1], a.stride()[:-1]) if size > 1] or [a.shape[-1]]
            worst = next((st for st in lead if st * a.element_size() % 16), lead[0])
            why = tma_reason(a.as_strided((1, a.shape[-1]), (worst, a.stride(-1))), b)   # one row: A's judge
            if why is None and cfg.get("PERSIST"):      # tma_reason passed: B is 2-D
                return persistent_reason(rows, b.shape[-1], cfg, _sms(a.device))
            return why
        return None

    @staticmethod
    def build(layer, cfg, device):
        return epilogue_runner(layer, lambda a, b, bias, residual, *epi: gemm_epilogue(a, b, bias, residual, 0,
                                                                                       *epi, cfg))


def epilogue_runner(layer, launch):
    """A MatMulEpilogue layer's run(inputs) → [out] around `launch(a, b, bias, residual, scale, activation, alpha,
    beta, residual_first)` with b as (K, N) (a trans_b weight read as its transpose) and a multiplied in memory
    order (rows_in_memory_order). The epilogue attributes are read once, here, not per call. Shared by the
    one-pass and the split-K Triton GEMM tactics."""
    at = layer.attrs
    trans_b = at.get("trans_b", 0)
    epi = (at.get("scale", 1.0), at.get("activation", "none"), at.get("alpha", 0.0), at.get("beta", 0.0),
           at.get("residual_first", 0))

    @rows_in_memory_order
    def product(a, b, bias, residual):
        return launch(a, b, bias, residual, *epi)

    def run(inputs):
        a, b, bias, residual = epilogue_operands(inputs)
        return [product(a, b.transpose(-1, -2) if trans_b else b, bias, residual)]
    return run
