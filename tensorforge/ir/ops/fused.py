"""Fused ops made by the fusion passes (passes/rules/): PointwiseChain, Attention, FusedConv, GatedConv, FusedConvPool,
MatMulEpilogue, TwoLayerMLP, AddLayerNormalization.

Each is an ordinary op with ONE torch reference, so every tactic (generated Triton, hand-written Triton,
torch) is tested against it and an engine can always fall back to running the reference eagerly.
Ops that already exist elsewhere are reused, never duplicated: Gelu (activation.py), LayerNormalization
(norm.py), Softmax (nn_misc.py). `POINTWISE_OPS` / `pointwise_reason` say which ops a PointwiseChain may
hold; codegen/ must implement every one of them (tests/codegen checks the two tables agree).
"""

import math

import torch
import torch.nn.functional as F

from ..dtypes import dtype_from_name
from ..opspec import REQUIRED, get_spec, op

_HALF = (torch.float16, torch.bfloat16)

# ---- PointwiseChain ---------------------------------------------------------------------------------

# ops a chain may contain: name → "float" (floating operands only) or "any" (any supported dtype)
POINTWISE_OPS: dict[str, str] = {
    **{n: "any" for n in ("Add", "Sub", "Mul", "Max", "Min", "Sum", "Neg", "Abs", "Relu", "Sign", "Where", "Cast",
                          "Identity", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or",
                          "Xor", "Not", "Clip")},
    **{n: "float" for n in ("Div", "Pow", "Mean", "Sqrt", "Exp", "Log", "Erf", "Reciprocal", "Floor", "Ceil",
                            "Sin", "Cos", "Sigmoid", "Tanh", "LeakyRelu", "Elu", "Celu", "Selu", "ThresholdedRelu",
                            "HardSigmoid", "HardSwish", "Softplus", "Softsign", "Mish", "PRelu", "Gelu",
                            "IsNaN", "IsInf", "QuantizeLinear")},      # Q: per-tensor literals, int8/uint8 out
}
CHAIN_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.int16,
                torch.int32, torch.int64, torch.uint8, torch.bool)
# Pow exponents the generated code evaluates exactly (repeated products, sqrt, reciprocal)
POW_EXPONENTS = (-2.0, -1.0, -0.5, 0.5, 1.0, 2.0, 3.0, 4.0)


def pointwise_reason(op_name: str, in_dtypes: list, literal_exponent: float | None = None) -> str | None:
    """Why a layer of `op_name` on inputs of `in_dtypes` cannot join a PointwiseChain (None: it can)."""
    kind = POINTWISE_OPS.get(op_name)
    if kind is None:
        return f"{op_name} is not an elementwise op"
    bad = [d for d in in_dtypes if d is not None and d not in CHAIN_DTYPES]
    if bad:
        return f"dtype {bad[0]} is not supported in generated kernels"
    if kind == "float" and any(d is not None and not d.is_floating_point for d in in_dtypes[:1]):
        return f"{op_name} on {in_dtypes[0]} is fused only for floating-point tensors"
    if op_name == "Pow" and literal_exponent not in POW_EXPONENTS:
        return f"Pow exponent must be a constant in {POW_EXPONENTS}, got {literal_exponent}"
    return None


def _widen(t):
    return t.to(torch.float32) if t is not None and t.dtype in _HALF else t


@op("PointwiseChain", attrs={"steps": REQUIRED, "consts": [], "outputs": REQUIRED, "out_dtypes": REQUIRED,
                             "kernel": ""})
def pointwise_chain(*inputs, steps, outputs, out_dtypes, consts=(), kernel=""):
    """A chain of elementwise/broadcast ops run as ONE kernel: every output element is computed from the
    matching (broadcast) input elements in registers, so memory traffic is Σ bytes(inputs) + Σ bytes(outputs)
    instead of two tensors per op.

    Program (JSON, stored in the engine): `steps` = [{"op", "args", "attrs"}], each arg "inK" (chain input),
    "cK" (scalar literal `consts[K]` = {"value", "dtype", "shape"}) or "sK" (result of step K); `outputs` names
    the steps written out, `out_dtypes` their dtypes; `kernel` is the hash of the generated source (builder).
    Semantics: each step is its op's own reference; float16/bfloat16 values are held in float32 between
    steps (a Cast to a half type rounds), and outputs are rounded once to `out_dtypes`.
    """
    device = next((t.device for t in inputs if t is not None), torch.device("cpu"))
    env = {f"in{i}": _widen(t) for i, t in enumerate(inputs)}
    for i, c in enumerate(consts):
        env[f"c{i}"] = _widen(torch.full(c["shape"], c["value"], dtype=dtype_from_name(c["dtype"]), device=device))
    for k, step in enumerate(steps):
        args = [env[a] if a else None for a in step["args"]]
        out = get_spec(step["op"]).reference(*args, **step["attrs"])
        env[f"s{k}"] = _widen(out if isinstance(out, torch.Tensor) else out[0])
    outs = tuple(env[r].to(dtype_from_name(d)) for r, d in zip(outputs, out_dtypes))
    return outs if len(outs) > 1 else outs[0]


# ---- epilogues shared by FusedConv and MatMulEpilogue -------------------------------------------------

ACTIVATIONS = ("none", "Relu", "Sigmoid", "Tanh", "LeakyRelu", "Clip", "HardSigmoid", "HardSwish", "Gelu",
               "Silu", "Elu", "PRelu")


def apply_activation(y, activation: str, alpha: float, beta: float):
    """y ← act(y). Clip uses (alpha, beta) as (min, max); LeakyRelu/Elu use alpha; HardSigmoid uses both;
    Gelu uses alpha=1 for the tanh form; Silu is y·σ(y)."""
    if activation == "none":
        return y
    if activation == "Relu":
        return torch.relu(y)
    if activation == "Sigmoid":
        return torch.sigmoid(y)
    if activation == "Tanh":
        return torch.tanh(y)
    if activation == "LeakyRelu":
        return F.leaky_relu(y, alpha)
    if activation == "Clip":
        return torch.clamp(y, alpha, beta)
    if activation == "HardSigmoid":
        return torch.clamp(alpha * y + beta, 0, 1)
    if activation == "HardSwish":
        return y * torch.clamp(y / 6 + 0.5, 0, 1)
    if activation == "Gelu":
        return F.gelu(y, approximate="tanh" if alpha == 1 else "none")
    if activation == "Silu":
        return y * torch.sigmoid(y)
    if activation == "Elu":
        return F.elu(y, alpha)
    if activation == "PRelu":
        raise ValueError("the PRelu epilogue needs its per-channel slope: FusedConv's fifth input")
    raise ValueError(f"unknown epilogue activation {activation!r}; known: {ACTIVATIONS}")


def apply_epilogue(y, bias, residual, activation, alpha, beta, residual_first, slope=None):
    """out = act(y + bias + residual) when residual_first, else act(y + bias) + residual. PRelu (FusedConv
    only): act(y) = y where y ≥ 0, else y·slope, slope one value per output channel, broadcast like bias."""
    if bias is not None:
        y = y + bias
    if residual is not None and residual_first:
        y = y + residual
    if activation == "PRelu":
        y = torch.where(y >= 0, y, y * slope)
    else:
        y = apply_activation(y, activation, alpha, beta)
    if residual is not None and not residual_first:
        y = y + residual
    return y


_EPILOGUE_ATTRS = {"activation": "none", "alpha": 0.0, "beta": 0.0, "residual_first": 0}
# FusedConv, GatedConv and FusedConvPool: Conv's attributes and the epilogue's
_FUSED_CONV_ATTRS = {"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None, "pads": None,
                     "strides": None, **_EPILOGUE_ATTRS}


@op("MatMulEpilogue", attrs={"trans_b": 0, "scale": 1.0, **_EPILOGUE_ATTRS})
def matmul_epilogue(a, b, bias=None, residual=None, *, trans_b=0, scale=1.0, activation="none", alpha=0.0, beta=0.0,
                    residual_first=0):
    """out = epilogue(scale · a @ b'), b' = bᵀ (last two dims) when trans_b, with the epilogue
    act(· + bias [+ residual]) [+ residual] (see apply_epilogue). bias and residual broadcast to the
    output. Traffic: read a, b, bias, residual once, write out once — the unfused graph also writes and
    re-reads the (M, N) product once per epilogue op.
    """
    if trans_b:
        b = b.transpose(-1, -2)
    y = torch.matmul(a, b)
    if scale != 1.0:
        y = y * scale
    return apply_epilogue(y, bias, residual, activation, alpha, beta, residual_first)


# one layer's MatMulEpilogue attributes (no residual) as TwoLayerMLP carries them, suffixed 1 and 2
MLP_LAYER_ATTRS = {"trans_b": 0, "scale": 1.0, "activation": "none", "alpha": 0.0, "beta": 0.0}
MLP_MAX_HIDDEN = 256     # the one-launch kernel keeps the hidden vector and one W1 tile in registers
MLP_MAX_ROWS = 256       # past that, each program's re-read of W1 makes the pair of tensor-core GEMMs the better


def mlp_layer_attrs(attrs: dict, k: int) -> dict:
    """Layer k's (1 or 2) MatMulEpilogue attributes out of a TwoLayerMLP's, with the defaults."""
    return {name: attrs.get(f"{name}{k}", default) for name, default in MLP_LAYER_ATTRS.items()}


@op("TwoLayerMLP", attrs={f"{k}{i}": v for i in (1, 2) for k, v in MLP_LAYER_ATTRS.items()})
def two_layer_mlp(a, w1, b1, w2, b2=None, **attrs):
    """out = MatMulEpilogue(MatMulEpilogue(a, w1, b1; ·1), w2, b2; ·2): h = act1(scale1·a·w1' + b1) in a's dtype,
    then act2(scale2·h·w2' + b2) (passes/rules/two_layer_mlp.py: a squeeze-excite block's two fully connected
    layers, C → H → C, H ≤ MLP_MAX_HIDDEN). b1/b2 may be absent (empty input). One launch instead of two, and h
    (rows × H) never leaves the chip; the two weights are read once per program, from L2 after the first."""
    h = matmul_epilogue(a, w1, b1, **mlp_layer_attrs(attrs, 1))
    return matmul_epilogue(h, w2, b2, **mlp_layer_attrs(attrs, 2))


@op("FusedConv", attrs=_FUSED_CONV_ATTRS)
def fused_conv(x, w, bias=None, residual=None, slope=None, *, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None,
               pads=None, strides=None, activation="none", alpha=0.0, beta=0.0, residual_first=0):
    """out = epilogue(Conv(x, w)) with Conv's ONNX attributes and the epilogue act(· + bias [+ residual])
    [+ residual]; bias is per output channel (C_out,), and so is `slope`, the PRelu activation's (absent for
    every other activation). Traffic: read x, w, residual once, write out once.
    """
    conv = get_spec("Conv").reference
    y = conv(x, w, None, auto_pad=auto_pad, dilations=dilations, group=group, kernel_shape=kernel_shape,
             pads=pads, strides=strides)
    if bias is not None:
        bias = bias.reshape([1, -1] + [1] * (y.dim() - 2))
    if slope is not None:
        slope = slope.reshape([1, -1] + [1] * (y.dim() - 2))
    return apply_epilogue(y, bias, residual, activation, alpha, beta, residual_first, slope)


@op("GatedConv", attrs=_FUSED_CONV_ATTRS)
def gated_conv(x, gate, w, bias=None, residual=None, **attrs):
    """out = FusedConv(x ⊙ gate, w, bias, residual): a squeeze-excite gate (N, C, 1, 1) scales x's channels per
    sample before the convolution (passes/rules/se_gate.py: Mul(x, σ(FC(GAP(x)))) → 1×1 projection, as in
    MobileNetV3 and EfficientNet). x ⊙ gate is rounded to x's dtype first, as the unfused Mul stores it.
    For a 1×1 convolution y[n, o] = Σ_c W[o, c]·g[n, c]·x[n, c]: the gate multiplies the GEMM's A operand as it is
    loaded, so x ⊙ gate is never written — the unfused graph writes and re-reads it (2·|x| of traffic)."""
    return fused_conv(x * gate, w, bias, residual, **attrs)


@op("FusedConvPool", attrs=_FUSED_CONV_ATTRS)
def fused_conv_pool(x, w, bias=None, residual=None, slope=None, **attrs):
    """(Y, P): Y = FusedConv(x, w, bias, residual) and P = GlobalAveragePool(Y), P[n, c] = (1/S)·Σ_s Y[n, c, s]
    (passes/rules/conv_pool.py). A squeeze-excite block, or a network's last pooled feature map, reads Y back
    only to average it: fused, the epilogue pass that writes Y also sums it, so Y is not read a second time and
    the pool costs no launch. When Y has no other reader the layer's first output is absent and Y is never
    written: traffic read x, w, residual, write N·C."""
    y = fused_conv(x, w, bias, residual, slope, **attrs)
    return y, get_spec("GlobalAveragePool").reference(y)


# ---- Attention ------------------------------------------------------------------------------------------

@op("Attention", attrs={"scale": None, "nan_to_zero": 0})
def attention(q, k, v, mask=None, *, scale=None, nan_to_zero=0):
    """out = softmax(q · kᵀ · scale + mask) · v over the last axis, q (…, Sq, D), k (…, Sk, D), v (…, Sk, Dv);
    scale defaults to 1/√D; mask (bool: True keeps, or additive float) broadcasts to (…, Sq, Sk).
    Leading dims broadcast. nan_to_zero=1 replaces NaN probabilities by 0, as the guard
    Where(IsNaN(P), 0, P) that torch's SDPA export adds: a query whose every key is masked gets 0, not NaN.

    The fused kernel (flash attention: kernels/) never writes the (Sq, Sk) score matrix: traffic is
    q + k + v + mask + out, against 4 · Sq · Sk extra elements for the unfused graph. This reference
    computes in float32 for half inputs (the softmax is the overflow risk) and returns q's dtype.
    """
    dtype = q.dtype
    qf, kf, vf = (t.to(torch.float32) if t.dtype in _HALF else t for t in (q, k, v))
    s = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    scores = torch.matmul(qf, kf.transpose(-1, -2)) * s
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask.to(scores.dtype)
    probs = torch.softmax(scores, dim=-1)
    if nan_to_zero:
        probs = torch.where(torch.isnan(probs), 0.0, probs)
    return torch.matmul(probs, vf).to(dtype)


# ---- residual Add + LayerNorm ---------------------------------------------------------------------------

@op("AddLayerNormalization", attrs={"axis": -1, "epsilon": 1e-5, "stash_type": 1})
def add_layer_normalization(a, b, scale, bias=None, *, axis=-1, epsilon=1e-5, stash_type=1):
    """(Y, S) with S = a + b (the residual stream, in a's dtype) and Y = LayerNormalization(S, scale, bias) over
    dims axis..r−1 (passes/rules/add_layernorm.py). One fused kernel reads a and b once and writes S and Y:
    traffic 4·|S| instead of the unfused 5·|S| (Add: 3, LayerNorm: 2), one launch instead of two."""
    s = a + b
    return get_spec("LayerNormalization").reference(s, scale, bias, axis=axis, epsilon=epsilon,
                                                     stash_type=stash_type)[0], s
