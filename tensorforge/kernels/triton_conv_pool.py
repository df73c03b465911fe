"""Tactic: FusedConvPool as cuDNN's convolution without bias, then ONE Triton pass that finishes and pools it.

    y = x ⊛ w                                                    (cuDNN, no bias)
    Y[n, c, s] = act(y[n, c, s] + bias[c] [+ r]) [+ r]            (written in place when Y is read elsewhere)
    P[n, c]    = (1/S) · Σ_s round(Y[n, c, s])                    (float32 sum of the stored values)

Program (n, cb) owns BLOCK_C channels of sample n and walks the S = H·W positions in BLOCK_HW chunks, so the
same kernel serves NCHW (positions contiguous) and channels-last (channels contiguous) memory through two strides.
Traffic: read y (and r) once, write Y once (or not at all) and N·C means — against the unfused epilogue
(read y, write Y) plus pool (read Y again) and one more launch. The sum is taken over Y rounded to its dtype, so
P is the mean of the stored Y exactly as the unfused pool computes it.
Configs: layout × tile shape; "pool": "separate" runs the unfused pair (epilogue kernel, then the Triton pool)
so that timing can still prefer it (few channels over a large image leave the fused grid small).
Entry points: tactic `fusedconvpool.cudnn_triton_pool`, launcher `conv_bias_act_pool_` (tests, CPU interpreter).
"""

import math

import torch
import triton
import triton.language as tl

from .quant_store import coded_output, quant_attrs, store_codes
from .registry import tactic
from .torch_fused import epilogue_attrs, epilogue_operands
from .triton_conv_epilogue import _CudnnTritonEpilogue, _is_nhwc, bias_free_conv, conv_bias_act_
from .triton_gemm import ACTIVATIONS, kernel_activation, residual_activation
from .triton_pool import global_avg_pool

TILES = [{"BLOCK_C": 64, "BLOCK_HW": 32, "warps": 4},      # many channels, few positions (late stages)
         {"BLOCK_C": 16, "BLOCK_HW": 128, "warps": 4},
         {"BLOCK_C": 2, "BLOCK_HW": 1024, "warps": 4}]     # few channels, many positions (early stages)
CONFIGS = ([{"layout": lay, "pool": "fused", **t} for lay in ("nhwc", "nchw") for t in TILES]
           + [{"layout": lay, "pool": "separate"} for lay in ("nhwc", "nchw")])


@triton.jit
def _conv_pool_kernel(Y, Bias, R, P, C, S, s_n, s_c, s_s, alpha, beta, HAS_BIAS: tl.constexpr,
                      HAS_RES: tl.constexpr, RES_FIRST: tl.constexpr, ACT: tl.constexpr, STORE_Y: tl.constexpr,
                      BLOCK_C: tl.constexpr, BLOCK_HW: tl.constexpr, Q=None, q_scale=1.0, q_r=1.0, q_zp=0.0, q_lo=0.0,
                      q_hi=0.0, Q_KIND: tl.constexpr = 0, STORE_P: tl.constexpr = True):
    # Q_KIND 1 / 2: also Q = QuantizeLinear(P as stored), (N, C) codes (FusedConvPoolQuantize: squeeze-excite's first
    # 1×1 convolution reads the pooled vector through a Q); STORE_P False: P is rounded for the Q but not written
    n = tl.program_id(0).to(tl.int64)
    cs = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    c_ok = cs < C
    base = n * s_n + cs[:, None].to(tl.int64) * s_c
    if HAS_BIAS:
        b = tl.load(Bias + cs, mask=c_ok, other=0.0).to(tl.float32)[:, None]
    acc = tl.zeros([BLOCK_C, BLOCK_HW], dtype=tl.float32)
    for start in range(0, S, BLOCK_HW):
        ss = start + tl.arange(0, BLOCK_HW)
        offs = base + ss[None, :].to(tl.int64) * s_s
        mask = c_ok[:, None] & (ss[None, :] < S)
        v = tl.load(Y + offs, mask=mask, other=0.0).to(tl.float32)
        if HAS_BIAS:
            v += b
        r = 0.0
        if HAS_RES:
            r = tl.load(R + offs, mask=mask, other=0.0).to(tl.float32)
        v = residual_activation(v, r, ACT, alpha, beta, HAS_RES, RES_FIRST)
        stored = v.to(Y.dtype.element_ty)
        if STORE_Y:
            tl.store(Y + offs, stored, mask=mask)
        acc += tl.where(mask, stored.to(tl.float32), 0.0)
    mean = tl.sum(acc, axis=1) / S
    if STORE_P:
        tl.store(P + n * C + cs, mean.to(P.dtype.element_ty), mask=c_ok)
    if Q_KIND != 0:
        store_codes(Q + n * C + cs, mean.to(P.dtype.element_ty), c_ok, q_scale, q_r, q_zp, q_lo, q_hi, Q_KIND)


def conv_bias_act_pool_(y, bias=None, residual=None, activation="none", alpha=0.0, beta=0.0, residual_first=0,
                        store_y=True, cfg=None, quant: dict | None = None):
    """(Y, P) from a raw 4-D convolution output y (dense NCHW or dense channels-last) in ONE Triton launch:
    Y = act(y + bias[c] [+ residual]) [+ residual] written over y when store_y (else y is left as it was and Y is
    None), P = mean of Y over the spatial positions, shape (N, C, 1, 1), y's dtype. With `quant` ({scale,
    zero_point, dtype, store_y}: store_y says whether P is written): (Y, P or None, Q(P))."""
    cfg = {**TILES[0], **(cfg or {})}
    activation = kernel_activation(activation, alpha)        # Gelu with alpha = 1 is the tanh form
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown epilogue activation {activation!r}; the Triton epilogue knows {ACTIVATIONS}")
    if y.dim() != 4:
        raise ValueError(f"the fused conv pool needs a 4-D convolution output, got {y.dim()}-D")
    nhwc = _is_nhwc(y)
    if not nhwc and not y.is_contiguous():
        raise ValueError(f"the fused conv pool needs y dense NCHW or channels-last (strides {y.stride()})")
    fmt = torch.channels_last if nhwc else torch.contiguous_format
    n, c, s = y.shape[0], y.shape[1], math.prod(y.shape[2:])
    pooled = torch.empty((n, c, 1, 1), dtype=y.dtype, device=y.device)
    q_args, codes = {}, None
    if quant is not None:
        if s == 0:
            raise ValueError("a quantized pool of an empty feature map (its mean is NaN) runs on the reference")
        codes, q_args = coded_output(quant, (n, c, 1, 1), y.device, store_flag="STORE_P")
    if pooled.numel() == 0 or s == 0:
        out = (y if store_y else None), pooled.fill_(float("nan")) if s == 0 else pooled
        return out if codes is None else (*out, codes)
    if bias is not None:
        bias = bias.reshape(-1)
        bias = (bias.expand(c) if bias.numel() != c else bias).contiguous()
    if residual is not None:
        residual = residual.expand(y.shape).contiguous(memory_format=fmt)
    s_c, s_s = (1, c) if nhwc else (s, 1)
    grid = (n, triton.cdiv(c, cfg["BLOCK_C"]))
    _conv_pool_kernel[grid](y, bias if bias is not None else y, residual if residual is not None else y, pooled,
                            c, s, y.stride(0), s_c, s_s, float(alpha), float(beta), HAS_BIAS=bias is not None,
                            HAS_RES=residual is not None, RES_FIRST=bool(residual_first), ACT=activation,
                            STORE_Y=bool(store_y), BLOCK_C=cfg["BLOCK_C"], BLOCK_HW=cfg["BLOCK_HW"],
                            num_warps=cfg["warps"], **q_args)
    if codes is None:
        return (y if store_y else None), pooled
    return (y if store_y else None), (pooled if quant.get("store_y", True) else None), codes


@tactic("FusedConvPool", name="cudnn_triton_pool", configs=CONFIGS, priority=-140)
class FusedConvPoolTriton:
    """Below torch_conv_pool (5): untimed builds keep the torch path; timed builds compare by measured time."""

    @staticmethod
    def supports(layer, device):
        return _CudnnTritonEpilogue.supports(layer, device)

    @staticmethod
    def build(layer, cfg, device):
        act, alpha, beta, res_first = epilogue_attrs(layer.attrs)
        conv = bias_free_conv(layer, cfg.get("layout", "nchw") == "nhwc")
        store_y = bool(layer.outputs and layer.outputs[0])
        separate = cfg.get("pool") == "separate"
        tile = {k: cfg[k] for k in ("BLOCK_C", "BLOCK_HW", "warps") if k in cfg}

        def run(inputs):
            x, w, bias, residual = epilogue_operands(inputs)
            y = conv(x, w)
            if separate:
                y = conv_bias_act_(y, bias, residual, act, alpha, beta, res_first)
                return [y if store_y else None, global_avg_pool(y)]
            return list(conv_bias_act_pool_(y, bias, residual, act, alpha, beta, res_first, store_y, tile))
        return run


@tactic("FusedConvPoolQuantize", name="cudnn_triton_pool", configs=[c for c in CONFIGS if c["pool"] == "fused"],
        priority=-140)
class FusedConvPoolQuantizeTriton:
    """FusedConvPool with squeeze-excite's Q of the pooled vector (ir/ops/quantized.py): the fused pooling pass above
    also writes P's codes, and P itself only where another layer reads it."""

    supports = staticmethod(FusedConvPoolTriton.supports)

    @staticmethod
    def build(layer, cfg, device):
        act, alpha, beta, res_first = epilogue_attrs(layer.attrs)
        conv = bias_free_conv(layer, cfg.get("layout", "nchw") == "nhwc")
        store_y = bool(layer.outputs and layer.outputs[0])
        quant = quant_attrs(layer)                 # its store_y: whether P (the output the Q reads) is written
        quant["store_y"] = bool(layer.outputs[1])
        tile = {k: cfg[k] for k in ("BLOCK_C", "BLOCK_HW", "warps") if k in cfg}

        def run(inputs):
            x, w, bias, residual = epilogue_operands(inputs)
            return list(conv_bias_act_pool_(conv(x, w), bias, residual, act, alpha, beta, res_first, store_y, tile,
                                            quant))
        return run
