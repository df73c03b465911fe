"""Quantized compute made by the Q/DQ fusion rules (passes/rules/qdq*.py): QuantizedConv, QuantizedConvTranspose,
QuantizedMatMul — one op each with ONE torch reference, the exact semantics every tactic is tested against.

    acc  = Σ_k (x − zx)(w − zw[c])                      exact integer (int8/uint8) or exact float64 (float8 E4M3)
    t    = float32(acc) · (sx · sw[c]) + bias[c]        float32, the multiplier sx·sw[c] rounded once to float32
    t    = act(t)                       if not residual_first
    t    = DQ(Q(t, s_mid, z_mid))       if mid_scale      (the producer's own Q/DQ before a residual Add)
    t    = t + post_bias[c]             if a post_bias    (a bias Add quantized on its own, as onnxruntime writes it)
    t    = t + DQ(r, s_r, z_r) | t + r  if a residual     (r quantized when residual_scale, else float)
    t    = act(t)                       if residual_first
    out  = Q(t, sy, zy) in y_dtype      if y_scale, else t in y_dtype (a float type)
    out2 = Q(t, s2, z2) in out2_dtype   if out2_scale (float out only): a second output, the next layer's Q of a
                                        tensor that other layers also read in float (passes/rules/qdq_dual.py)

Q and DQ are ONNX's QuantizeLinear/DequantizeLinear (ir/ops/quant.py): round half to even, saturate. Activation
scales and zero points are per tensor (attributes), weight scales and zero points per output channel (lists of
length 1 or C_out), so an engine stores every scale as data in its manifest. Weights are stored quantized.
Traffic: read x (1 byte/elem), w (1 byte), bias and residual once; write out once (1 byte when quantized).
"""

import torch

from ..dtypes import dtype_from_name
from ..opspec import REQUIRED, get_spec, op
from .fused import apply_activation
from .low_precision import FLOAT8, INT_RANGES

QUANT_DTYPES = ("int8", "uint8", "float8_e4m3fn")    # x_dtype, mid_dtype, y_dtype (y_dtype also a float type)
_CONV = {"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None, "pads": None, "strides": None}
_QUANT = {"x_dtype": REQUIRED, "x_scale": REQUIRED, "x_zero_point": 0, "w_scale": REQUIRED, "w_zero_point": None,
          "mid_scale": 0.0, "mid_zero_point": 0, "mid_dtype": "",
          "residual_scale": 0.0, "residual_zero_point": 0,
          "activation": "none", "alpha": 0.0, "beta": 0.0, "residual_first": 1,
          "y_scale": 0.0, "y_zero_point": 0, "y_dtype": "float32",
          "out2_scale": 0.0, "out2_zero_point": 0, "out2_dtype": ""}


def quantize(t: torch.Tensor, scale: float, zero_point, dtype: str) -> torch.Tensor:
    """ONNX QuantizeLinear of float32 `t` with a per-tensor scale (the QuantizeLinear reference). The scale and zero
    point are made on t's device by fill kernels, not copied from the host: a reference epilogue on CUDA stays
    capturable in a CUDA graph."""
    dt = dtype_from_name(dtype)
    zp = torch.zeros((), dtype=dt, device=t.device) if dt in FLOAT8 else torch.full((), zero_point, dtype=dt,
                                                                                      device=t.device)
    return get_spec("QuantizeLinear").reference(t.float(), torch.full((), scale, dtype=torch.float32, device=t.device),
                                                zp)


def dequantize(q: torch.Tensor, scale: float, zero_point) -> torch.Tensor:
    """ONNX DequantizeLinear to float32 with a per-tensor scale."""
    if q.dtype in FLOAT8:
        return q.float() * torch.tensor(scale, dtype=torch.float32)
    return (q.to(torch.int64) - int(zero_point)).float() * torch.tensor(scale, dtype=torch.float32)


def centered(q: torch.Tensor, zero_point, channel_axis: int | None = None) -> torch.Tensor:
    """q − zero_point in float64 (exact for 8-bit integers and float8); zero_point a scalar or per channel."""
    v = q.double() if q.dtype in FLOAT8 else q.to(torch.int64).double()
    if zero_point is None or q.dtype in FLOAT8:
        return v
    z = torch.tensor(zero_point, dtype=torch.float64).reshape(-1)
    if z.numel() == 1:
        return v - z[0]
    shape = [1] * v.dim()
    shape[channel_axis] = -1
    return v - z.reshape(shape)


def channel_multiplier(x_scale: float, w_scale: list[float]) -> torch.Tensor:
    """float32(sx) · float32(sw[c]), rounded once to float32: shape (C,) or (1,)."""
    return torch.tensor(x_scale, dtype=torch.float32) * torch.tensor(w_scale, dtype=torch.float32).reshape(-1)


def requantize(acc: torch.Tensor, mult: torch.Tensor, bias, residual, a: dict, channel_axis: int,
               post_bias=None) -> torch.Tensor:
    """The epilogue from a float32 accumulator (exact integer values, or float8 sums) to the output (module doc)."""
    shape = [1] * acc.dim()
    shape[channel_axis] = -1
    t = acc.float() * mult.to(acc.device).reshape(shape)
    if bias is not None:
        t = t + bias.float().reshape(shape)
    if not a["residual_first"]:
        t = apply_activation(t, a["activation"], a["alpha"], a["beta"])
    if a["mid_scale"]:
        t = dequantize(quantize(t, a["mid_scale"], a["mid_zero_point"], a["mid_dtype"]), a["mid_scale"],
                       a["mid_zero_point"])
    if post_bias is not None:
        t = t + post_bias.float().reshape(shape)
    if residual is not None:
        r = dequantize(residual, a["residual_scale"], a["residual_zero_point"]) if a["residual_scale"] \
            else residual.float()
        t = t + r
    if a["residual_first"]:
        t = apply_activation(t, a["activation"], a["alpha"], a["beta"])
    if a["y_scale"]:
        return quantize(t, a["y_scale"], a["y_zero_point"], a["y_dtype"])
    if a.get("out2_scale"):
        return t.to(dtype_from_name(a["y_dtype"])), quantize(t, a["out2_scale"], a["out2_zero_point"], a["out2_dtype"])
    return t.to(dtype_from_name(a["y_dtype"]))


def check_operands(x: torch.Tensor, w: torch.Tensor, a: dict) -> None:
    """The declared activation type (x_dtype) is the one given, and the weights are of the same family."""
    want = dtype_from_name(a["x_dtype"])
    if x.dtype != want or (w.dtype in FLOAT8) != (want in FLOAT8):
        raise TypeError(f"quantized op declared for {a['x_dtype']} activations got {x.dtype} with {w.dtype} weights")


def exact_accumulator(acc64: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The float64 product sum as the accumulator a kernel holds: integers exactly (int32 range), float8 sums
    rounded to float32 (what an fp32-accumulating tensor core returns up to summation order)."""
    if x.dtype in FLOAT8:
        return acc64.float()
    lo, hi = INT_RANGES[torch.int32]
    return torch.round(acc64).clamp(lo, hi)


@op("QuantizedConv", attrs={**_CONV, **_QUANT})
def quantized_conv(x, w, bias=None, residual=None, post_bias=None, **a):
    """Conv(DQ(x), DQ(w)) with the quantized epilogue of the module doc; w (C_out, C_in/group, k…) quantized,
    per-output-channel w_scale/w_zero_point along axis 0, output channel axis 1."""
    check_operands(x, w, a)
    conv = get_spec("Conv").reference
    acc = conv(centered(x, a["x_zero_point"]), centered(w, a["w_zero_point"], 0).to(x.device), None,
               **{k: a[k] for k in _CONV})
    return requantize(exact_accumulator(acc, x), channel_multiplier(a["x_scale"], a["w_scale"]), bias, residual,
                      a, 1, post_bias)


@op("QuantizedConvTranspose", attrs={**_CONV, "output_padding": None, "output_shape": None, **_QUANT})
def quantized_conv_transpose(x, w, bias=None, residual=None, post_bias=None, **a):
    """ConvTranspose(DQ(x), DQ(w)) with the quantized epilogue; w (C_in, C_out/group, k…) with per-output-channel
    scales along axis 1 (ONNX's DequantizeLinear axis for ConvTranspose weights)."""
    check_operands(x, w, a)
    convt = get_spec("ConvTranspose").reference
    attrs = {k: a[k] for k in (*_CONV, "output_padding", "output_shape")}
    acc = convt(centered(x, a["x_zero_point"]), centered(w, a["w_zero_point"], 1).to(x.device), None, **attrs)
    return requantize(exact_accumulator(acc, x), channel_multiplier(a["x_scale"], a["w_scale"]), bias, residual,
                      a, 1, post_bias)


@op("QuantizedMatMul", attrs=dict(_QUANT))
def quantized_matmul(a_, w, bias=None, residual=None, post_bias=None, **a):
    """DQ(a) @ DQ(w)ᵀ with the quantized epilogue: a (…, M, K), w (N, K) quantized (stored transposed, as a
    GEMM's B operand in column-major), per-column w_scale/w_zero_point (length 1 or N), output (…, M, N)."""
    check_operands(a_, w, a)
    acc = torch.matmul(centered(a_, a["x_zero_point"]), centered(w, a["w_zero_point"], 0).to(a_.device).t())
    return requantize(exact_accumulator(acc, a_), channel_multiplier(a["x_scale"], a["w_scale"]), bias, residual,
                      a, acc.dim() - 1, post_bias)


@op("BlockQuantizedMatMul", attrs={"block_size": REQUIRED, "activation": "none", "alpha": 0.0, "beta": 0.0})
def block_quantized_matmul(a_, w, scale, zero_point=None, bias=None, **a):
    """Weight-only quantization (ONNX opset 21 blocked DequantizeLinear on a MatMul's weights, e.g. int4):
    out = act(a @ DQ(w)ᵀ + bias), w (N, K) int4/uint4/int8 as stored (one value a byte), scale and zero_point
    (N, ⌈K/block_size⌉) — one per block of `block_size` consecutive k. DQ is ONNX's: (w − z)·s in the scale's
    type. Traffic: a once, w 1 byte/weight (half of fp16; a packed layout would halve it again), out once."""
    from .quant import dequantize_linear
    wf = dequantize_linear(w, scale, zero_point, axis=1, block_size=a["block_size"]).to(a_.dtype)
    y = torch.matmul(a_, wf.t())
    if bias is not None:
        y = y + bias.to(y.dtype)
    return apply_activation(y, a["activation"], a["alpha"], a["beta"])


# a fused layer's per-tensor output Q; each -Quantize op has its base op's attributes (read from its spec) and these
_Q_ATTRS = {"q_scale": REQUIRED, "q_zero_point": 0, "q_dtype": REQUIRED}


def _lnq_infer(x, scale, bias=None, **a):
    return (torch.empty(x.shape, dtype=x.dtype, device="meta"),
            torch.empty(x.shape, dtype=dtype_from_name(a["q_dtype"]), device="meta"))


@op("LayerNormalizationQuantize", attrs={**get_spec("LayerNormalization").attrs, **_Q_ATTRS}, infer=_lnq_infer)
def layer_normalization_quantize(x, scale, bias=None, *, axis=-1, epsilon=1e-5, stash_type=1, q_scale=None,
                                 q_zero_point=0, q_dtype=None):
    """(Y, Q(Y)): LayerNormalization, and its output (in x's dtype, as the QuantizeLinear that read it saw it)
    quantized per tensor — the next GEMM's Q as a second output of the normalisation (passes/rules/qdq_producer.py).
    One kernel reads x once and writes Y and the 1-byte Q(Y): traffic 3·|x|·b + |x| instead of 2·|x|·b for the
    LayerNorm plus |x|·b + |x| for the QuantizeLinear, and one launch instead of two."""
    y = get_spec("LayerNormalization").reference(x, scale, bias, axis=axis, epsilon=epsilon, stash_type=stash_type)[0]
    return y, quantize(y, q_scale, q_zero_point, q_dtype)


def _addlnq_infer(a_, b, scale, bias=None, **a):
    return (torch.empty(a_.shape, dtype=a_.dtype, device="meta"), torch.empty(a_.shape, dtype=a_.dtype, device="meta"),
            torch.empty(a_.shape, dtype=dtype_from_name(a["q_dtype"]), device="meta"))


@op("AddLayerNormalizationQuantize", attrs={**get_spec("AddLayerNormalization").attrs, **_Q_ATTRS},
    infer=_addlnq_infer)
def add_layer_normalization_quantize(a_, b, scale, bias=None, *, axis=-1, epsilon=1e-5, stash_type=1, q_scale=None,
                                     q_zero_point=0, q_dtype=None):
    """(Y, S, Q(Y)): AddLayerNormalization (S = a + b, Y = LayerNorm(S)) with Y, as stored in a's dtype, also
    quantized per tensor — a pre-norm transformer's residual add, its LayerNorm and the next GEMM's Q in one kernel
    (passes/rules/qdq_producer.py). Reads a and b once; writes S, the 1-byte Q(Y), and Y only where another layer
    reads it (the fused layer's first output absent otherwise): 3·|S|·b + |S| bytes against the unfused
    4·|S|·b (AddLayerNorm) + |S|·b + |S| (QuantizeLinear), and one launch instead of two."""
    y, s = get_spec("AddLayerNormalization").reference(a_, b, scale, bias, axis=axis, epsilon=epsilon,
                                                       stash_type=stash_type)
    return y, s, quantize(y, q_scale, q_zero_point, q_dtype)


def _attq_infer(q, k, v, mask=None, **a):
    q, k, v, mask = (t if t is None else t.to("meta") for t in (q, k, v, mask))    # a constant mask is real
    y = get_spec("Attention").reference(q, k, v, mask, scale=a["scale"], nan_to_zero=a["nan_to_zero"])
    return y, torch.empty(y.shape, dtype=dtype_from_name(a["q_dtype"]), device="meta")


@op("AttentionQuantize", attrs={**get_spec("Attention").attrs, **_Q_ATTRS}, infer=_attq_infer)
def attention_quantize(q, k, v, mask=None, *, scale=None, nan_to_zero=0, q_scale=None, q_zero_point=0, q_dtype=None):
    """(O, Q(O)): Attention (ir/ops/fused.py) and its output, as stored in q's dtype, quantized per tensor — the
    output projection's Q taken into the attention kernel's store (passes/rules/qdq_producer.py, once the Q has
    climbed the Transpose/Reshape that merge the heads: qdq_hoist.py). The kernel writes 1 byte per output
    element, and O only where another layer reads it: against O (2 bytes) written, read back and quantized by a
    separate launch (2 + 2 + 1 bytes)."""
    o = get_spec("Attention").reference(q, k, v, mask, scale=scale, nan_to_zero=nan_to_zero)
    return o, quantize(o, q_scale, q_zero_point, q_dtype)


_FUSED_CONV_ATTRS = dict(get_spec("FusedConv").attrs)      # the convolution and its epilogue


def _conv_attrs(a: dict) -> dict:
    return {k: a[k] for k in _FUSED_CONV_ATTRS}


@op("FusedConvQuantize", attrs={**_FUSED_CONV_ATTRS, **_Q_ATTRS})
def fused_conv_quantize(x, w, bias=None, residual=None, slope=None, **a):
    """(Y, Q(Y)): FusedConv (ir/ops/fused.py) and its output, as stored in x's dtype, quantized per tensor — the next
    quantized convolution's Q in the epilogue (passes/rules/qdq_producer.py): a mobile net's depthwise convolution,
    kept in float under INT8, feeding the 1×1 projection. The epilogue writes 1 byte per element, and Y only where
    another layer reads it: against Y (2 bytes) written, read back and quantized by a separate launch (2 + 2 + 1)."""
    y = get_spec("FusedConv").reference(x, w, bias, residual, slope, **_conv_attrs(a))
    return y, quantize(y, a["q_scale"], a["q_zero_point"], a["q_dtype"])


@op("FusedConvPoolQuantize", attrs={**_FUSED_CONV_ATTRS, **_Q_ATTRS})
def fused_conv_pool_quantize(x, w, bias=None, residual=None, slope=None, **a):
    """(Y, P, Q(P)): FusedConvPool (Y and its spatial mean P) with P, as stored in x's dtype, quantized per tensor —
    squeeze-excite's first 1×1 convolution reads the pooled vector through a Q. The pooling pass writes the N·C
    codes beside P (and P only where another layer reads it): one launch less per squeeze-excite block."""
    y, p = get_spec("FusedConvPool").reference(x, w, bias, residual, slope, **_conv_attrs(a))
    return y, p, quantize(p, a["q_scale"], a["q_zero_point"], a["q_dtype"])
