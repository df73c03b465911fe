"""Tactic: GatedConv, 1×1 — a squeeze-excite gate, the convolution and its epilogue as ONE Triton GEMM.

    y[n, o, h, w] = epi(Σ_c W[o, c]·(x[n, c, h, w]·g[n, c]) + b[o])   ≡   Y (N·H·W, O) = epi((X ⊙ G_rows)·Wᵀ)

X is x's channels-last rows (N·H·W, C) (kernels/triton_conv1x1.py), and row m belongs to sample n = m // (H·W),
so the A tile loaded for rows rm and channels k is multiplied by g[rm // (H·W), k] before the product: a gather
from the (N, C) gate, which stays in L1/L2 (C·N elements against the tile's BM·BK). The product x·g is rounded to
x's dtype first, as the unfused Mul stores it, so the GEMM sees the same operand bits. Traffic: x once, W once per
row tile pass, y once — the unfused Mul reads x and writes x ⊙ g (2·|x|), which the projection reads again.
Pointer main loop only: the tensor-descriptor loop hands A to the product straight from shared memory, with no
registers to scale it in. Epilogue: the MatMulEpilogue kernel's (triton_gemm._epilogue_store).
Entry points: the tactic `gatedconv.triton_gated_gemm`; the launcher `gated_conv1x1`.
"""

import torch
import triton
import triton.language as tl

from ..ir.ops.conv import pointwise_conv_reason
from .registry import tactic, triton_device_reason
from .torch_fused import epilogue_attrs
from .triton_conv1x1 import CONFIGS as CONV1X1_CONFIGS, FusedConv1x1, channels_last_rows
from .triton_gemm import ACTIVATIONS, _epilogue_store, grouped_tile, kernel_activation, output_tiles

# the pointer-loop configs of the 1×1 GEMM (its TMA one cannot scale A), plus the narrow 64×32 tile: projections
# write 16–320 channels
CONFIGS = [c for c in CONV1X1_CONFIGS if not c.get("TMA")] + \
    [{"layout": "nhwc", "BM": 64, "BN": 32, "BK": 32, "G": 8, "stages": 5, "warps": 2}]


@triton.jit
def _gated_gemm_kernel(A, Gate, B, Bias, R, C, M, N, K, HW, s_am, s_ak, s_gn, s_gk, s_bk, s_bn, s_rm, s_rn, s_cm,
                       s_cn, alpha, beta, HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, RES_FIRST: tl.constexpr,
                       ACT: tl.constexpr, PRECISION: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                       BK: tl.constexpr, G: tl.constexpr):
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BM, BN, G)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = A + rm[:, None].to(tl.int64) * s_am + rk[None, :] * s_ak
    g_ptrs = Gate + (rm // HW)[:, None].to(tl.int64) * s_gn + rk[None, :] * s_gk
    b_ptrs = B + rk[:, None] * s_bk + rn[None, :].to(tl.int64) * s_bn
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, K, BK):
        a_mask = (rm[:, None] < M) & (rk[None, :] + k < K)
        a = tl.load(a_ptrs, mask=a_mask, other=0.0)
        gate = tl.load(g_ptrs, mask=a_mask, other=0.0)
        a = (a.to(tl.float32) * gate.to(tl.float32)).to(a.dtype)
        b = tl.load(b_ptrs, mask=(rk[:, None] + k < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision=PRECISION)
        a_ptrs += BK * s_ak
        g_ptrs += BK * s_gk
        b_ptrs += BK * s_bk
    _epilogue_store(acc, rm, rn, M, N, Bias, R, s_rm, s_rn, C, s_cm, s_cn, 1.0, alpha, beta, HAS_BIAS, HAS_RES,
                    RES_FIRST, ACT)


def gated_conv1x1(x, gate, w, bias=None, residual=None, activation="none", alpha=0.0, beta=0.0, residual_first=0,
                  cfg=None, allow_tf32=None):
    """GatedConv for a 1×1 convolution: x (N, C, H, W), gate (N or 1, C, 1, 1), w (O, C, 1, 1); returns
    (N, O, H, W) in channels-last memory."""
    cfg = {**CONFIGS[0], **(cfg or {})}
    activation = kernel_activation(activation, alpha)
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown epilogue activation {activation!r}")
    n, c, h, wd = x.shape
    out_c = w.shape[0]
    a = channels_last_rows(x)
    g2 = gate.reshape(gate.shape[0], c)
    s_gn = g2.stride(0) if g2.shape[0] > 1 else 0        # one gate for every sample: row → sample 0
    b = w.reshape(out_c, c).t()                          # (C, O) read through the weight's strides
    m = a.shape[0]
    y = torch.empty((m, out_c), dtype=x.dtype, device=x.device)
    r = channels_last_rows(residual.expand(n, out_c, h, wd)) if residual is not None else y
    bias_v = bias.reshape(-1).expand(out_c).contiguous() if bias is not None else y
    if allow_tf32 is None:
        allow_tf32 = torch.backends.cuda.matmul.allow_tf32
    precision = "tf32" if (x.dtype == torch.float32 and allow_tf32 and x.device.type == "cuda") else "ieee"
    if m and out_c:
        _gated_gemm_kernel[(output_tiles(m, out_c, cfg),)](
            a, g2, b, bias_v, r, y, m, out_c, c, h * wd, *a.stride(), s_gn, g2.stride(1), *b.stride(), *r.stride(),
            *y.stride(), float(alpha), float(beta), HAS_BIAS=bias is not None, HAS_RES=residual is not None,
            RES_FIRST=bool(residual_first), ACT=activation, PRECISION=precision, BM=cfg["BM"], BN=cfg["BN"],
            BK=cfg["BK"], G=cfg["G"], num_warps=cfg["warps"], num_stages=cfg["stages"])
    return y.view(n, h, wd, out_c).permute(0, 3, 1, 2)


@tactic("GatedConv", name="triton_gated_gemm", configs=CONFIGS, priority=-145)
class TritonGatedConv1x1:
    """GatedConv(x, gate, w[, bias[, residual]]), 1×1: below the library tactics (the gate Mul, then cuDNN), so
    untimed builds keep those; timed builds compare by measured time."""

    @staticmethod
    def supports(layer, device):
        why = triton_device_reason(device) or pointwise_conv_reason(layer.attrs)
        if why:
            return why
        act = kernel_activation(layer.attrs.get("activation", "none"), layer.attrs.get("alpha", 0.0))
        return None if act in ACTIVATIONS else f"activation {act!r} has no Triton epilogue"

    @staticmethod
    def fits(layer, cfg, inputs):
        """The 1×1 GEMM's judgement (FusedConv1x1.fits) on x and w: 16-row tiles only for skinny products."""
        return FusedConv1x1.fits(layer, cfg, [inputs[0]] + list(inputs[2:]))

    @staticmethod
    def build(layer, cfg, device):
        act, alpha, beta, res_first = epilogue_attrs(layer.attrs)

        def run(inputs):
            x, gate, w = inputs[0], inputs[1], inputs[2]
            bias = inputs[3] if len(inputs) > 3 else None
            residual = inputs[4] if len(inputs) > 4 else None
            return [gated_conv1x1(x, gate, w, bias, residual, act, alpha, beta, res_first, cfg)]
        return run
