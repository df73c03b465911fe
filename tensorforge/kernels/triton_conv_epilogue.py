"""Tactic: FusedConv (and Conv with a bias) as cuDNN's convolution WITHOUT bias, then ONE Triton epilogue in place.

    y = x ⊛ w                                              (cuDNN/oneDNN, no bias: the library adds none)
    y[i] ← act(y[i] + bias[c(i)] [+ r[i]]) [+ r[i]]         (one Triton kernel over y, float32 inside)

torch's own path adds the bias in a separate broadcast kernel and then runs the activation (HardSwish: 3–4
kernels) and the residual add as more kernels; here the epilogue is one launch. Traffic of the epilogue:
read y, bias (C values) and r once, write y once — the unfused chain reads and writes y once per op.
The channel of flat offset i follows y's memory layout: NCHW → c = ⌊i / (H·W)⌋ mod C, NHWC → c = i mod C.
Configs {"layout": "nhwc"} (x and w channels-last, as conv_cudnn_fused.py) and {"layout": "nchw"}.
Entry points: the tactics `fusedconv.cudnn_triton_epilogue` / `conv.cudnn_triton_epilogue`, and the launcher
`conv_bias_act_` (used by tests on CPU tensors under TRITON_INTERPRET=1).
"""

import math

import torch
import triton
import triton.language as tl

from ..ir import get_spec
from .quant_store import coded_output, quant_attrs, store_codes
from .registry import tactic, triton_device_reason
from .torch_fused import conv_attrs, epilogue_attrs, epilogue_operands
from .triton_gemm import ACTIVATIONS, kernel_activation, residual_activation

BLOCK = 1024
WARPS = 4


@triton.jit
def _conv_epilogue_kernel(Y, Bias, R, numel, C, HW, alpha, beta, HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr,
                          RES_FIRST: tl.constexpr, ACT: tl.constexpr, CHANNELS_LAST: tl.constexpr,
                          INT64: tl.constexpr, BLOCK: tl.constexpr, Q=None, q_scale=1.0, q_r=1.0, q_zp=0.0,
                          q_lo=0.0, q_hi=0.0, Q_KIND: tl.constexpr = 0, STORE_Y: tl.constexpr = True):
    # Q_KIND 1 (int8/uint8) / 2 (float8 E4M3): also Q = QuantizeLinear(y as stored), laid out like Y (the next
    # quantized convolution's Q: FusedConvQuantize); STORE_Y False: y is rounded for the Q but not written back
    if INT64:
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    else:
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    v = tl.load(Y + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        if CHANNELS_LAST:
            c = offs % C
        else:
            c = (offs // HW) % C
        v += tl.load(Bias + c, mask=mask, other=0.0).to(tl.float32)
    r = 0.0
    if HAS_RES:
        r = tl.load(R + offs, mask=mask, other=0.0).to(tl.float32)
    v = residual_activation(v, r, ACT, alpha, beta, HAS_RES, RES_FIRST)
    if STORE_Y:
        tl.store(Y + offs, v.to(Y.dtype.element_ty), mask=mask)
    if Q_KIND != 0:
        store_codes(Q + offs, v.to(Y.dtype.element_ty), mask, q_scale, q_r, q_zp, q_lo, q_hi, Q_KIND)


def _is_nhwc(t: torch.Tensor) -> bool:
    """True when t is dense channels-last and not also dense NCHW (when both hold, C = 1 or H·W = 1, the two
    element orders coincide and the NCHW channel formula is exact)."""
    return t.dim() == 4 and not t.is_contiguous() and t.is_contiguous(memory_format=torch.channels_last)


def conv_bias_act_(y, bias=None, residual=None, activation="none", alpha=0.0, beta=0.0, residual_first=0,
                   channels_last=None, block=BLOCK, warps=WARPS, quant: dict | None = None):
    """y ← act(y + bias[c] [+ residual]) [+ residual] in ONE Triton launch, in place; returns y. With `quant`
    ({scale, zero_point, dtype, store_y}): (y, Q(y)), the codes of y as stored laid out like y; with store_y False
    y is left as the convolution wrote it and (None, Q(y)) is returned.

    y: (N, C, *spatial), dense NCHW (any rank ≥ 2) or dense channels-last (4-D); channels_last=None reads the
    layout from y's strides. bias: C values (or None), any float dtype. residual: y's shape, made dense in y's
    layout first (a no-op when it already is). Math in float32, one rounding to y's dtype.
    """
    activation = kernel_activation(activation, alpha)        # Gelu with alpha = 1 is the tanh form
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown epilogue activation {activation!r}; the Triton epilogue knows {ACTIVATIONS}")
    if channels_last is None:
        channels_last = _is_nhwc(y)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    if y.dim() < 2 or (channels_last and y.dim() != 4) or not y.is_contiguous(memory_format=fmt):
        raise ValueError(f"the conv epilogue needs y dense in the {'NHWC' if channels_last else 'NCHW'} layout "
                         f"(shape {tuple(y.shape)}, strides {y.stride()})")
    numel, channels = y.numel(), y.shape[1]
    q_args, codes = {}, None
    if quant is not None:
        codes, q_args = coded_output(quant, y.shape, y.device, y.stride())
    result = y if quant is None else (y if quant.get("store_y", True) else None, codes)
    if numel == 0:
        return result
    hw = math.prod(y.shape[2:])
    if bias is not None:
        bias = bias.reshape(-1)
        if bias.numel() != channels:
            bias = bias.expand(channels)         # a single value broadcast to every channel
        bias = bias.contiguous()
    if residual is not None:
        if tuple(residual.shape) != tuple(y.shape):
            residual = residual.expand(y.shape)
        residual = residual.contiguous(memory_format=fmt)
    grid = (triton.cdiv(numel, block),)
    _conv_epilogue_kernel[grid](y, bias if bias is not None else y, residual if residual is not None else y,
                                numel, channels, hw, float(alpha), float(beta), HAS_BIAS=bias is not None,
                                HAS_RES=residual is not None, RES_FIRST=bool(residual_first), ACT=activation,
                                CHANNELS_LAST=bool(channels_last), INT64=numel + block >= 2 ** 31, BLOCK=block,
                                num_warps=warps, **q_args)
    return result


def _spatial_rank_reason(attrs: dict) -> str | None:
    """Why the layer is not a 2-D convolution, judged from its per-dim attributes (the weight decides at run time)."""
    for name, per_dim in (("kernel_shape", 1), ("strides", 1), ("dilations", 1), ("pads", 2)):
        value = attrs.get(name)
        if value and len(value) != 2 * per_dim:
            return f"only 2-D convolutions ({name} {list(value)})"
    return None


class _CudnnTritonEpilogue:
    @staticmethod
    def supports(layer, device):
        why = triton_device_reason(device)
        if why is not None:
            return why
        why = _spatial_rank_reason(layer.attrs)
        if why is not None:
            return why
        act = layer.attrs.get("activation", "none")
        if act not in ACTIVATIONS:
            return f"activation {act!r} has no Triton epilogue (known: {', '.join(ACTIVATIONS)})"
        return None

    @staticmethod
    def build(layer, cfg, device):
        act, alpha, beta, res_first = epilogue_attrs(layer.attrs)
        conv = bias_free_conv(layer, cfg.get("layout", "nchw") == "nhwc")

        def run(inputs):
            x, w, bias, residual = epilogue_operands(inputs)
            y = conv(x, w)
            return [conv_bias_act_(y, bias, residual, act, alpha, beta, res_first)]
        return run


def bias_free_conv(layer, channels_last: bool):
    """conv(x, w) → the layer's 2-D convolution without bias through cuDNN, x and w in the layout (w converted once
    per weight tensor), the result dense NCHW or dense channels-last (whichever the library returned; made dense
    in the layout otherwise) — the input of the Triton epilogues."""
    conv = get_spec("Conv").reference        # resolves pads / auto_pad exactly as the IR op does
    attrs = conv_attrs(layer.attrs)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    kept: list = [None, None]                # (weight tensor seen, its copy in the layout)

    def run(x, w):
        if x.dim() != 4 or w.dim() != 4:
            raise ValueError(f"the cuDNN + Triton epilogue tactics run 2-D convolutions (x is {x.dim()}-D)")
        if kept[0] is not w:
            kept[0], kept[1] = w, w.contiguous(memory_format=fmt)
        y = conv(x.contiguous(memory_format=fmt), kept[1], None, **attrs)
        if not _is_nhwc(y) and not y.is_contiguous():          # the library returned neither dense layout
            y = y.contiguous(memory_format=fmt)
        return y
    return run


@tactic("FusedConv", name="cudnn_triton_epilogue", configs=[{"layout": "nhwc"}, {"layout": "nchw"}], priority=-140)
class FusedConvTritonEpilogue(_CudnnTritonEpilogue):
    """FusedConv(x, w[, bias[, residual]]): below torch_conv (5) and torch_ref (-100), so untimed builds keep
    their choice; timed builds compare it with the others by measured time."""


@tactic("Conv", name="cudnn_triton_epilogue", configs=[{"layout": "nhwc"}, {"layout": "nchw"}], priority=-140)
class ConvTritonBias(_CudnnTritonEpilogue):
    """Conv(x, w, b): the bias add as the vectorised Triton epilogue instead of torch's broadcast kernel."""

    @staticmethod
    def supports(layer, device):
        if len(layer.inputs) < 3 or not layer.inputs[2]:
            return "the convolution has no bias: cuDNN alone does all the work (the other Conv tactics)"
        return _CudnnTritonEpilogue.supports(layer, device)


@tactic("FusedConvQuantize", name="cudnn_triton_epilogue", configs=[{"layout": "nhwc"}, {"layout": "nchw"}],
        priority=-140)
class FusedConvQuantizeTritonEpilogue(_CudnnTritonEpilogue):
    """FusedConv with the next quantized convolution's Q (ir/ops/quantized.py): the epilogue above also writes the
    codes of y, and y itself only where another layer reads it."""

    @staticmethod
    def build(layer, cfg, device):
        act, alpha, beta, res_first = epilogue_attrs(layer.attrs)
        conv = bias_free_conv(layer, cfg.get("layout", "nchw") == "nhwc")
        quant = quant_attrs(layer)

        def run(inputs):
            x, w, bias, residual = epilogue_operands(inputs)
            return list(conv_bias_act_(conv(x, w), bias, residual, act, alpha, beta, res_first, quant=quant))
        return run
