"""Tactic: BlockQuantizedMatMul (weight-only blocked int4/uint4/int8, ir/ops/quantized.py) as one Triton GEMM that
dequantizes the weight tile in registers: out = act(A · ((W − Z)·S)ᵀ + bias).

A (M, K) float16/bfloat16/float32 activations; W (N, K) one value a byte (the int4 storage of the IR), S and Z
(N, ⌈K/bs⌉) read per element of the tile through k // bs (tiny, cache-resident). The dequantized tile is cast to
A's type and multiplied on the tensor cores with a float32 accumulator (IEEE for float32 inputs).
Traffic: A once per column of tiles, W 1 byte/weight once per row of tiles (an fp16 weight would be 2), out once.
"""

import torch
import triton
import triton.language as tl

from ..ir.ops.low_precision import as_int
from .registry import tactic, triton_device_reason
from .triton_gemm import apply_activation, grouped_tile, kernel_activation, output_tiles

CONFIGS = [
    {"BM": 64, "BN": 128, "BK": 32, "G": 8, "stages": 4, "warps": 4},
    {"BM": 128, "BN": 128, "BK": 32, "G": 8, "stages": 3, "warps": 8},
    {"BM": 16, "BN": 128, "BK": 64, "G": 1, "stages": 4, "warps": 4},     # decode-like: few rows
]


@triton.jit
def _w4_kernel(A, W, S, Z, Bias, C, M, N, K, bs, s_am, s_ak, s_wn, s_wk, s_sn, s_sg, s_cm, s_cn, alpha, beta,
               HAS_ZP: tl.constexpr, HAS_BIAS: tl.constexpr, ACT: tl.constexpr, IEEE: tl.constexpr,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, G: tl.constexpr):
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BM, BN, G)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        kk = k + rk
        a = tl.load(A + rm[:, None].to(tl.int64) * s_am + kk[None, :] * s_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        wmask = (rn[None, :] < N) & (kk[:, None] < K)
        w = tl.load(W + rn[None, :].to(tl.int64) * s_wn + kk[:, None] * s_wk, mask=wmask, other=0).to(tl.float32)
        grp = kk[:, None] // bs
        s = tl.load(S + rn[None, :] * s_sn + grp * s_sg, mask=wmask, other=0.0).to(tl.float32)
        if HAS_ZP:
            w = w - tl.load(Z + rn[None, :] * s_sn + grp * s_sg, mask=wmask, other=0).to(tl.float32)
        b = (w * s).to(A.dtype.element_ty)
        if IEEE:
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
    nmask = rn < N
    if HAS_BIAS:
        acc = acc + tl.load(Bias + rn, mask=nmask, other=0.0).to(tl.float32)[None, :]
    acc = apply_activation(acc, ACT, alpha, beta)
    tl.store(C + rm[:, None].to(tl.int64) * s_cm + rn[None, :] * s_cn, acc.to(C.dtype.element_ty),
             mask=(rm[:, None] < M) & nmask[None, :])


def run_w4(layer, inputs, cfg, interpret=False):
    a_, w, s = inputs[0], inputs[1], inputs[2]
    zp = inputs[3] if len(inputs) > 3 else None
    bias = inputs[4] if len(inputs) > 4 else None
    at = layer.attrs
    lead = a_.shape[:-1]
    a2 = a_.reshape(-1, a_.shape[-1])
    m, k = a2.shape
    w8 = as_int(w)
    n = w8.shape[0]
    z8 = as_int(zp) if zp is not None else None
    out = torch.empty((m, n), dtype=a_.dtype, device=a_.device)
    grid = (output_tiles(m, n, cfg),)
    opts = {} if interpret else {"num_warps": cfg["warps"], "num_stages": cfg["stages"]}
    _w4_kernel[grid](a2, w8, s, z8 if z8 is not None else w8, bias if bias is not None else s, out, m, n, k,
                     int(at["block_size"]), a2.stride(0), a2.stride(1), w8.stride(0), w8.stride(1), s.stride(0),
                     s.stride(1), out.stride(0), out.stride(1), float(at["alpha"]), float(at["beta"]),
                     HAS_ZP=z8 is not None, HAS_BIAS=bias is not None,
                     ACT=kernel_activation(at["activation"], at["alpha"]),
                     IEEE=a_.dtype == torch.float32, BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], G=cfg["G"], **opts)
    return out.reshape(*lead, n)


@tactic("BlockQuantizedMatMul", name="triton_w4", configs=CONFIGS, priority=20)
class TritonW4:
    @staticmethod
    def supports(layer, device):
        return triton_device_reason(device)

    @staticmethod
    def fits(layer, cfg, inputs):
        if inputs[0].dtype not in (torch.float16, torch.bfloat16, torch.float32):
            return f"activations are {inputs[0].dtype}"
        if inputs[0].shape[:-1].numel() > 64 and cfg["BM"] == 16:
            return "the 16-row tile is for products of at most 64 rows"
        return None

    @staticmethod
    def build(layer, cfg, device):
        return lambda inputs: [run_w4(layer, inputs, cfg)]
