"""Bias, activation and residual Add as epilogues of Conv / MatMul / Gemm → FusedConv or MatMulEpilogue.

Exporters: every torch.onnx.export of nn.Linear on a 3-D input (MatMul + Add(bias)), of Linear + GELU/ReLU
(BERT/GPT-2 FFNs), of Conv + ReLU/ReLU6/SiLU/HardSwish (ResNet, MobileNet, EfficientNet) and of residual
blocks (ResNet's relu(bn(conv(x)) + identity), transformer x + dense(h)); TF converters alike. The fused
layer writes its output once: the unfused graph writes and re-reads the product once per epilogue op.

    core ─► [Add(bias)] ─► [Add(residual)] ─► [act] ─► [Add(residual)] ─► y      (at least one epilogue op)

bias: a constant that broadcasts per output channel (Conv: (C,), (C,1,1), (1,C,1,1)) or per column (MatMul/
Gemm: (N,), (1,N)); residual: a computed tensor of exactly the output's shape; act: Relu, Sigmoid, Tanh,
LeakyRelu, Elu, HardSigmoid, HardSwish, Gelu, Clip with constant bounds, SiLU written as y·σ(y), or PRelu with
a constant slope (one value: LeakyRelu; one per output channel: FusedConv's PRelu epilogue with the slope as its
fifth input — the face-detection cascades' Conv → PRelu, exported by caffe2onnx and torch alike).
"""

import torch

from ...ir import Layer
from ..pattern import AnyOf, Const, Op, Var
from .base import Rule


def _constant(g, name):
    return None if g.constant(name) is not None else "not a constant"


def _computed(g, name):
    return None if g.constant(name) is None else "a constant, not a residual"


_core = Op("Conv|MatMul|Gemm", any_inputs=True, name="core")
_biased = AnyOf(Op("Add", _core, Var("bias", _constant), name="bias_add"), _core)
_pre = AnyOf(Op("Add", _biased, Var("res", _computed), name="res_add"), _biased)


def _acts(z):
    simple = [Op(a, z, name="act") for a in ("Relu", "Sigmoid", "Tanh", "LeakyRelu", "Elu", "HardSigmoid",
                                             "HardSwish", "Gelu")]
    return simple + [Op("Clip", z, Const(name="clip_lo"), Const(name="clip_hi"), name="act"),
                     Op("Clip", z, Const(name="clip_lo"), name="act"),
                     Op("Mul", z, Op("Sigmoid", z), name="act"),
                     Op("PRelu", z, Var("slope", _constant), name="act")]


_activated = AnyOf(*_acts(_pre), _pre)
PATTERN = AnyOf(Op("Add", _activated, Var("res", _computed), name="res_add"), _activated)


def _activation(layer: Layer | None, m) -> tuple[str, float, float]:
    if layer is None:
        return "none", 0.0, 0.0
    a = layer.attrs
    if layer.op == "Mul":
        return "Silu", 0.0, 0.0
    if layer.op == "Clip":
        lo = float(m["clip_lo.value"].reshape(-1)[0])
        hi = float(m["clip_hi.value"].reshape(-1)[0]) if "clip_hi" in m.binds else float("inf")
        return "Clip", lo, hi
    if layer.op == "LeakyRelu":
        return "LeakyRelu", float(a.get("alpha", 0.01)), 0.0
    if layer.op == "Elu":
        return "Elu", float(a.get("alpha", 1.0)), 0.0
    if layer.op == "HardSigmoid":
        return "HardSigmoid", float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))
    if layer.op == "Gelu":
        return "Gelu", 1.0 if a.get("approximate", "none") == "tanh" else 0.0, 0.0
    if layer.op == "PRelu" and m["slope.numel"] == 1:
        return "LeakyRelu", m["slope.value"], 0.0
    return layer.op, 0.0, 0.0


class Epilogue(Rule):
    """act(core + bias [+ residual]) [+ residual], core ∈ {Conv, MatMul, Gemm} ⇒ FusedConv / MatMulEpilogue."""

    name = "act(W⊛x + b [+ r]) [+ r] ⇒ FusedConv / MatMulEpilogue"
    roots = {"Add", "Relu", "Sigmoid", "Tanh", "LeakyRelu", "Elu", "HardSigmoid", "HardSwish", "Gelu", "Clip", "Mul",
             "PRelu"}
    anchor = {"Conv", "MatMul", "Gemm"}
    pattern = PATTERN

    def check(self, m, g):
        core: Layer = m["core"]
        if core is m.root:
            return "nothing to fuse"
        out = core.outputs[0]
        dt, shape = g.dtype(out), g.shape(out)
        if dt is None or not dt.is_floating_point or shape is None:
            return f"{core.op} output is {dt} with shape {shape}"
        if "res" in m.binds and any(m["res"] in x.outputs for x in m.layers):
            return f"the residual {m['res']!r} is computed inside the matched layers (x + x): it would vanish"
        if "res" in m.binds and not g.same_shape(m["res"], out):
            return f"the residual {m['res']!r} does not have the output's shape {shape}"
        if not g.same_shape(out, m.root.outputs[0]):
            return "the epilogue broadcasts the output beyond the product's shape"
        channels = shape[1] if core.op == "Conv" else shape[-1]
        if channels < 0:
            return "the output channel count is dynamic"
        if "bias" in m.binds:
            why = per_channel_reason(g.constant(m["bias"]), core.op, len(shape), channels)
            if why:
                return f"bias {m['bias']!r}: {why}"
        if core.op == "Gemm":
            if core.attrs.get("transA", 0):
                return "Gemm with transA=1"
            if len(core.inputs) > 2 and core.inputs[2]:
                c = g.constant(core.inputs[2])
                if c is None or per_channel_reason(c, "Gemm", 2, channels) or "bias" in m.binds:
                    return "Gemm's C is not a per-column constant (or a second bias follows)"
        if core.op == "Conv":
            if g.constant(core.inputs[1]) is None:
                return "the convolution weights are computed at run time"
            if len(core.inputs) > 2 and core.inputs[2] and g.constant(core.inputs[2]) is None:
                return "the convolution bias is computed at run time"
        if "slope" in m.binds:
            why = _slope_reason(g.constant(m["slope"]), core.op, len(shape), channels)
            if why:
                return f"PRelu slope {m['slope']!r}: {why}"
            slope = g.constant(m["slope"])
            m.binds["slope.numel"] = slope.numel()
            m.binds["slope.value"] = float(slope.reshape(-1)[0])
        m.binds["channels"] = channels
        return None

    def rewrite(self, m, g):
        net, core = g.net, m["core"]
        channels = m["channels"]
        parts: list[torch.Tensor] = []
        if "bias" in m.binds:
            parts.append(net.constants[m["bias"]].reshape(-1).expand(channels))
        if core.op == "Conv" and len(core.inputs) > 2 and core.inputs[2]:
            parts.append(net.constants[core.inputs[2]].reshape(-1))
        if core.op == "Gemm" and len(core.inputs) > 2 and core.inputs[2]:
            c = net.constants[core.inputs[2]].reshape(-1).expand(channels)
            parts.append(c * float(core.attrs.get("beta", 1.0)))
        bias = ""
        if parts:
            total = parts[0]
            for p in parts[1:]:
                total = total + p
            bias = net.add_constant(net.unique_name(f"{core.name}/epilogue_bias"), total.clone())
        act, alpha, beta = _activation(m.get("act"), m)
        res_first = 1 if m.get("res_add") is not None and m.get("act") is not None and \
            any(x is m["res_add"] for x in _below(m["act"], m)) else 0
        attrs = {"activation": act, "alpha": alpha, "beta": beta, "residual_first": res_first}
        inputs = [core.inputs[0], core.inputs[1], bias, m.get("res", "")]
        if act == "PRelu":
            inputs.append(net.add_constant(net.unique_name(f"{core.name}/epilogue_slope"),
                                           net.constants[m["slope"]].reshape(-1).clone()))
        while inputs and not inputs[-1]:
            inputs.pop()
        if core.op == "Conv":
            attrs.update({k: v for k, v in core.attrs.items() if k in _CONV_ATTRS})
            return [self.new_layer(g, m, "FusedConv", inputs, attrs=attrs, suffix="/fused_conv")]
        if core.op == "Gemm":
            attrs.update(trans_b=int(core.attrs.get("transB", 0)), scale=float(core.attrs.get("alpha", 1.0)))
        return [self.new_layer(g, m, "MatMulEpilogue", inputs, attrs=attrs, suffix="/matmul_epilogue")]


_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


def _below(layer: Layer, m) -> list[Layer]:
    """The matched layers that produce `layer`'s inputs (one level)."""
    producers = {o: x for x in m.layers for o in x.outputs}
    return [producers[i] for i in layer.inputs if i in producers]


def _slope_reason(c: torch.Tensor, core_op: str, rank: int, channels: int) -> str | None:
    """PRelu's slope broadcasts against the output from the right: one value becomes LeakyRelu, one per output
    channel (Conv only: (C, 1, …, 1)) becomes the PRelu epilogue."""
    if c.numel() == 1 and c.dtype.is_floating_point:
        return None if c.dim() <= rank else f"shape {tuple(c.shape)} broadcasts the output to a higher rank"
    if core_op != "Conv":
        return f"a per-column PRelu slope ({tuple(c.shape)}) after {core_op} has no epilogue (only Conv's per-channel one)"
    return per_channel_reason(c, core_op, rank, channels)


def per_channel_reason(c: torch.Tensor, core_op: str, rank: int, channels: int) -> str | None:
    if c is None:
        return "not a constant"
    if not c.dtype.is_floating_point:
        return f"dtype {c.dtype}"
    dims = list(c.shape)
    if core_op == "Conv":
        want_tail = [channels] + [1] * (rank - 2)
        while dims and dims[0] == 1 and len(dims) > len(want_tail):
            dims.pop(0)
        ok = dims == want_tail[-len(dims):] and c.numel() == channels if dims else False
    else:
        while dims and dims[0] == 1 and len(dims) > 1:
            dims.pop(0)
        ok = dims == [channels] or (dims == [1] and channels == 1)
    return None if ok else f"shape {tuple(c.shape)} is not one value per output channel ({channels})"


RULES = [Epilogue()]
