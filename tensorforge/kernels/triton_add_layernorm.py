"""Tactic: AddLayerNormalization (residual Add + LayerNorm over the last axis) as one Triton kernel per row.

    S = a + b            (rounded to a's dtype: the residual stream, as the unfused Add stores it)
    Y = (S − μ) / √(σ² + ε) · γ + β,   μ, σ² over the row in float32 (two-pass form)

a and b are read through their own strides as (R0, R1, N) with a unit last stride — a transposed residual
(ViT's attention output) is read in place, no copy. S and Y are written contiguous.
Traffic: read a, b; write S, Y: 4·M·N elements (unfused: Add 3, LayerNorm 2, plus any copy of a strided input);
3·M·N where nothing reads S (a post-norm block: the layer's second output absent) and S is not written.
Rows up to MAX_SINGLE elements stay in registers; longer rows are refused (the reference runs them).
"""

import torch
import triton
import triton.language as tl

from .registry import tactic, triton_device_reason
from .quant_store import coded_output, quant_attrs, store_codes
from .triton_layernorm import LAYERNORM_CONFIGS, layernorm

MAX_SINGLE = 16384


@triton.jit
def _add_layernorm_kernel(A, B, W, Bias, S, Y, R1, N, sa0, sa1, sb0, sb1, eps, HAS_BIAS: tl.constexpr,
                          STORE_S: tl.constexpr, BLOCK_N: tl.constexpr, Q=None, q_scale=1.0, q_r=1.0, q_zp=0.0,
                          q_lo=0.0, q_hi=0.0, Q_KIND: tl.constexpr = 0, STORE_Y: tl.constexpr = True):
    # Q_KIND 1 (int8/uint8) / 2 (float8 E4M3): also Q = QuantizeLinear(Y as stored); STORE_Y False: Y not written
    row = tl.program_id(0).to(tl.int64)
    i0 = row // R1
    i1 = row % R1
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    a = tl.load(A + i0 * sa0 + i1 * sa1 + cols, mask=mask, other=0.0)
    b = tl.load(B + i0 * sb0 + i1 * sb1 + cols, mask=mask, other=0.0)
    s = (a.to(tl.float32) + b.to(tl.float32)).to(Y.dtype.element_ty)
    if STORE_S:
        tl.store(S + row * N + cols, s, mask=mask)
    x = s.to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    d = tl.where(mask, x - mean, 0.0)
    rstd = tl.rsqrt(tl.sum(d * d, axis=0) / N + eps)
    y = d * rstd * tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        y += tl.load(Bias + cols, mask=mask, other=0.0).to(tl.float32)
    if STORE_Y:
        tl.store(Y + row * N + cols, y.to(Y.dtype.element_ty), mask=mask)
    if Q_KIND != 0:
        store_codes(Q + row * N + cols, y.to(Y.dtype.element_ty), mask, q_scale, q_r, q_zp, q_lo, q_hi, Q_KIND)


def _rows(t: torch.Tensor) -> torch.Tensor:
    """t as (R0, R1, N) with a unit last stride: a view when t's leading dims allow, else a copy."""
    n = t.shape[-1]
    if t.dim() == 1:
        t3 = t.reshape(1, 1, n)
    elif t.dim() == 2:
        t3 = t.unsqueeze(0)
    else:
        t3 = t.reshape(-1, t.shape[-2], n)
    return t3 if t3.stride(-1) == 1 or n == 1 else t3.contiguous()


def add_layernorm(a, b, scale, bias, eps: float, warps: int = 4, keep_sum: bool = True, quant: dict | None = None):
    """(Y, S) of AddLayerNormalization over the last axis (launcher shared by the tactic and tests); S is None
    and never written when not `keep_sum` (nothing reads the sum: 3·M·N traffic instead of 4). `quant`
    ({scale, zero_point, dtype, store_y}): (Y, S, Q(Y)) with the per-tensor Q of Y as stored; Y None and never
    written when not store_y."""
    if a.shape != b.shape:
        raise ValueError(f"AddLayerNormalization operands differ in shape: {tuple(a.shape)} vs {tuple(b.shape)}")
    n = a.shape[-1]
    if n > MAX_SINGLE:
        raise ValueError(f"rows of {n} elements exceed the single-pass limit {MAX_SINGLE}")
    store_y = quant is None or quant.get("store_y", True)
    y = torch.empty(a.shape if store_y else (1,), dtype=a.dtype, device=a.device)   # (1,): only its dtype is read
    s = torch.empty(a.shape, dtype=a.dtype, device=a.device) if keep_sum else None
    q_args, q = {}, None
    if quant is not None:
        q, q_args = coded_output(quant, a.shape, a.device)
    outs = (y if store_y else None, s) if quant is None else (y if store_y else None, s, q)
    if q is None and y.numel() == 0 or q is not None and q.numel() == 0:
        return outs
    a3, b3 = _rows(a), _rows(b)
    w = scale.to(a.device).expand(n).contiguous()
    bb = bias.to(a.device).expand(n).contiguous() if bias is not None else w
    rows = a3.shape[0] * a3.shape[1]
    _add_layernorm_kernel[(rows,)](a3, b3, w, bb, s if keep_sum else y, y, a3.shape[1], n, a3.stride(0),
                                   a3.stride(1), b3.stride(0), b3.stride(1), eps, HAS_BIAS=bias is not None,
                                   STORE_S=keep_sum,
                                   BLOCK_N=1 << max(4, (n - 1).bit_length()), num_warps=warps, **q_args)
    return outs


class _LastAxisAddLayerNorm:
    """What the two Triton tactics share: CUDA, float32 statistics, the last axis, inputs (a, b, γ[, β])."""

    @staticmethod
    def supports(layer, device):
        why = triton_device_reason(device)
        if why is not None:
            return why
        if layer.attrs.get("stash_type", 1) != 1:
            return f"stash_type={layer.attrs.get('stash_type')} (the kernel keeps float32 statistics)"
        return None

    @staticmethod
    def quant(layer) -> dict | None:
        """The layer's per-tensor Q of Y (the -Quantize op), else None."""
        return None

    @classmethod
    def build(cls, layer, cfg, device):
        eps = float(layer.attrs.get("epsilon", 1e-5))
        keep_sum = len(layer.outputs) > 1 and bool(layer.outputs[1])      # absent: nothing reads the sum
        quant = cls.quant(layer)

        def run(inputs):
            a, b, scale = inputs[0], inputs[1], inputs[2]
            bias = inputs[3] if len(inputs) > 3 else None
            if a.dim() and int(layer.attrs.get("axis", -1)) % a.dim() != a.dim() - 1:
                raise ValueError("the Triton kernel normalises over the last axis only")
            return cls.compute(a, b, scale, bias, eps, cfg, keep_sum, quant)
        return run


@tactic("AddLayerNormalization", name="triton_rowwise", configs=[{"warps": 4}, {"warps": 8}, {"warps": 2}],
        priority=10)
class TritonAddLayerNorm(_LastAxisAddLayerNorm):
    @staticmethod
    def fits(layer, cfg, inputs):
        a, b = inputs[0], inputs[1]
        if tuple(a.shape) != tuple(b.shape):
            return (f"the operands differ in shape ({tuple(a.shape)} and {tuple(b.shape)}): "
                    "triton_shift_rows adds a row vector")
        return None

    @staticmethod
    def compute(a, b, scale, bias, eps, cfg, keep_sum=True, quant=None):
        return list(add_layernorm(a, b, scale, bias, eps, int(cfg.get("warps", 4)), keep_sum))


@tactic("AddLayerNormalization", name="triton_shift_rows", configs=LAYERNORM_CONFIGS, priority=9)
class TritonShiftLayerNorm(_LastAxisAddLayerNorm):
    """Y = LayerNorm(a + b) for b one value per column (a convolution's bias moved past the transpose into the
    LayerNorm, passes/rules/conv_bias_layernorm.py) and the sum not kept: the LayerNorm kernel with a row shift,
    multi-row and strided configs included — the same traffic as the LayerNorm alone."""

    @staticmethod
    def supports(layer, device):
        if len(layer.outputs) > 1 and layer.outputs[1]:
            return "the sum is read by later layers (this tactic does not write it)"
        return _LastAxisAddLayerNorm.supports(layer, device)

    @staticmethod
    def fits(layer, cfg, inputs):
        a, b = inputs[0], inputs[1]
        if a.dim() == 0 or b.numel() != a.shape[-1] or any(d != 1 for d in b.shape[:-1]):
            return f"b {tuple(b.shape)} is not one value per column of a {tuple(a.shape)}"
        return None

    @staticmethod
    def compute(a, b, scale, bias, eps, cfg, keep_sum=False, quant=None):
        return [layernorm(a, scale, bias, -1, eps, int(cfg.get("warps", 4)), rows=int(cfg.get("rows", 1)),
                          strided=bool(cfg.get("strided", 0)), shift=b), None]


@tactic("AddLayerNormalizationQuantize", name="triton_rowwise", configs=[{"warps": 4}, {"warps": 8}, {"warps": 2}],
        priority=10)
class TritonAddLayerNormQuantize(_LastAxisAddLayerNorm):
    """(Y, S, Q(Y)) in the row kernel above, with its quantized store (ir/ops/quantized.py); S and Y are written
    only where the layer's outputs are present (read by later layers)."""

    fits = staticmethod(TritonAddLayerNorm.fits)
    quant = staticmethod(quant_attrs)

    @staticmethod
    def compute(a, b, scale, bias, eps, cfg, keep_sum, quant):
        return list(add_layernorm(a, b, scale, bias, eps, int(cfg.get("warps", 4)), keep_sum, quant))
