"""Q/DQ fusion: DQ(x)·DQ(w) → Conv/ConvTranspose/Gemm/MatMul (+bias, +activation, +Q/DQ, +residual Add,
+activation) → Q  ⇒  one QuantizedConv / QuantizedConvTranspose / QuantizedMatMul (ir/ops/quantized.py).

Exporters: onnxruntime's `quantize_static(quant_format=QDQ, per_channel=True)` (uint8 activations with zero
points, int8 symmetric per-channel weights, int32 bias behind a DequantizeLinear, Relu/Clip dropped into the
next Q's range), NVIDIA ModelOpt / pytorch-quantization (int8 symmetric activations, Q/DQ only at each conv's
inputs, float bias, residual Add and ReLU after the conv), PyTorch's PT2E/FX `convert_to_reference` export
(weights written as Q(float)→DQ), and the FP8 E4M3 form opset 19+ writes (float8e4m3fn zero points). The
implicit-INT8 pass (builder, calibration) inserts the same IR Q/DQ layers, so both eras share this one path.

    x_q ─► DQ ─┐                                   [Q_mid ─► DQ_mid ─► + b₂]   r_q ─► DQ ─┐ (or a float r)
               ├─► Conv|ConvT|Gemm|MatMul ─► [+b] ─► [act] ─────────────────────────────────► [+ r] ─► [act] ─► [Q] ─► y
    w_q ─► DQ ─┘   (weights: a constant, or Q of a float constant: stored quantized in the engine)

The DQs of x and r stay in the graph for other readers (removed when none is left); the fused op reads x_q
and r_q directly. Runs before constant folding, which would otherwise turn every weight DQ into float weights.
"""

import torch

from ...ir import get_spec
from ...util.log import get_logger
from ..pattern import AnyOf, Const, Op, Var
from .base import Rule, rule_pass
from .epilogue import per_channel_reason
from .qdq_int4 import BlockedWeightMatMul
from .qdq_patterns import ACTIVATION_OPS, activation_of, activations_of, quantize_of
from .qdq_params import QUANT_TYPES, dequant, dequantized_constant, per_tensor, quantize_params, quantized_constant

_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


def _dq_input(g, name):
    d, why = dequant(g, name)
    return why or per_tensor(d, f"input {name!r}")


def _dq_weight(g, name):
    d, why = dequant(g, name)
    return why or quantized_constant(g, d)[1]


def _known_float(g, name):
    return dequantized_constant(g, name)[1]


def _computed(g, name):
    if g.constant(name) is not None or dequantized_constant(g, name)[0] is not None:
        return "a constant, not a residual"
    return None


def _chain(core):
    biased = AnyOf(Op("Add", core, Var("bias", _known_float), name="bias_add"), core)
    act1 = AnyOf(*activations_of(biased, "act1"), biased)
    mid = AnyOf(Op("DequantizeLinear", quantize_of(act1, "mid_q"), Const(name="mid_dq_s"), Const(name="mid_dq_z"),
                   name="mid_dq"),
                Op("DequantizeLinear", quantize_of(act1, "mid_q"), Const(name="mid_dq_s"), name="mid_dq"), act1)
    post = AnyOf(Op("Add", mid, Var("post_bias", _known_float), name="post_add"), mid)
    res = AnyOf(Op("Add", post, Var("res", _computed), name="res_add"), post)
    act2 = AnyOf(*activations_of(res, "act2"), res)
    return AnyOf(quantize_of(act2, "out_q"), act2)


def _core(op_name):
    x, w = Var("x", _dq_input), Var("w", _dq_weight)
    return AnyOf(Op(op_name, x, w, Var("cbias", _known_float), name="core"), Op(op_name, x, w, name="core"))


class QDQFusion(Rule):
    """Shared check/rewrite of the three rules; `op` is the ONNX core op, `fused` the IR op it becomes."""

    op, fused = "", ""
    anchor = {"Conv", "ConvTranspose", "MatMul", "Gemm"}

    def __init__(self):
        self.pattern = _chain(_core(self.op))
        self.roots = {"QuantizeLinear", "Add", "Clip", "Mul", self.op, *ACTIVATION_OPS}

    # ---- per-op geometry: weight (canonical layout, channel axis), output channel axis --------------------
    def weight_axis(self, core, w: torch.Tensor) -> tuple[int, str | None]:
        raise NotImplementedError

    def canonical_weight(self, core, w: torch.Tensor) -> torch.Tensor:
        return w

    def core_attrs(self, core) -> dict:
        return {k: v for k, v in core.attrs.items() if k in _CONV_ATTRS}

    def check(self, m, g):
        core = m["core"]
        out = m.root.outputs[0]
        x, _ = dequant(g, m["x"])
        wd, _ = dequant(g, m["w"])
        if (x.dtype == torch.float8_e4m3fn) != (wd.dtype == torch.float8_e4m3fn):
            return f"activations are {x.dtype} but weights are {wd.dtype}: one kernel takes both int8 or both fp8"
        w, _ = quantized_constant(g, wd)
        axis, why = self.weight_axis(core, w)
        if why:
            return why
        if wd.scale.numel() > 1 and wd.axis % w.dim() != axis:
            return f"weights are quantized along axis {wd.axis}, not the output channels (axis {axis})"
        channels = w.shape[axis]
        if wd.scale.numel() not in (1, channels):
            return f"{wd.scale.numel()} weight scales for {channels} output channels"
        shape = g.shape(core.outputs[0])
        if shape is None:
            return f"the shape of {core.outputs[0]!r} is unknown"
        if m.get("act1") is not None and m.get("act2") is not None:
            return "two activations in one epilogue"
        for key in ("bias", "cbias", "post_bias"):
            if key in m.binds:
                b, _ = dequantized_constant(g, m[key])
                if key == "cbias":          # the core's own bias input: (C,) for Conv, broadcastable C for Gemm
                    why = None if b.numel() in (1, channels) and b.dim() <= 2 and \
                        (b.numel() == 1 or b.shape[-1] == channels) else f"shape {tuple(b.shape)} is not per channel"
                else:
                    why = per_channel_reason(b, "Conv" if core.op.startswith("Conv") else "Gemm", len(shape),
                                             channels)
                if why:
                    return f"bias {m[key]!r}: {why}"
        if "res" in m.binds and not g.same_shape(m["res"], out if m.get("out_q") is None else m["out_q"].inputs[0]):
            return f"the residual {m['res']!r} does not have the output's shape"
        if not g.same_shape(core.outputs[0], out):
            return "the epilogue broadcasts the output beyond the product's shape"
        for key in ("mid_q", "out_q"):
            if m.get(key) is not None:
                p, why = quantize_params(g, m[key])
                if why:
                    return why
                m.binds[key + ".params"] = p
        if m.get("mid_q") is not None:
            d, why = dequant(g, m["mid_dq"].outputs[0])
            p = m["mid_q.params"]
            if why or d.scale.numel() != 1 or float(d.scale[0]) != p["scale"] or \
                    (0 if d.zero_point is None or d.zero_point.dtype == torch.float8_e4m3fn
                     else int(d.zero_point[0])) != p["zero_point"]:
                return why or f"Q {m['mid_q'].name!r} and DQ {m['mid_dq'].name!r} do not use the same scale"
        return self.core_check(core, g)

    def core_check(self, core, g) -> str | None:
        return None

    def rewrite(self, m, g):
        net, core = g.net, m["core"]
        x, _ = dequant(g, m["x"])
        wd, _ = dequant(g, m["w"])
        w, _ = quantized_constant(g, wd)
        axis, _ = self.weight_axis(core, w)
        channels = w.shape[axis]
        w_scale = wd.scale * float(core.attrs.get("alpha", 1.0)) if core.op == "Gemm" else wd.scale
        fp8 = x.dtype == torch.float8_e4m3fn
        w_zp = None if wd.zero_point is None or fp8 or not bool(wd.zero_point.to(torch.int64).any()) \
            else [int(v) for v in wd.zero_point.to(torch.int64)]
        parts = []
        plain_post = "post_bias" in m.binds and m.get("mid_q") is None and m.get("act1") is None
        for key in ("cbias", "bias") + (("post_bias",) if plain_post else ()):   # nothing between: a bias
            if key in m.binds:
                b = dequantized_constant(g, m[key])[0].float().reshape(-1).expand(channels)
                parts.append(b * float(core.attrs.get("beta", 1.0)) if key == "cbias" and core.op == "Gemm" else b)
        act, alpha, beta = activation_of(m, "act1" if m.get("act1") is not None else "act2")
        geometry = self.core_attrs(core)
        if self.op in ("Conv", "ConvTranspose") and not geometry.get("kernel_shape"):   # ONNX: from the weights
            geometry["kernel_shape"] = [int(d) for d in w.shape[2:]]
        attrs = {**geometry, "activation": act, "alpha": alpha, "beta": beta,
                 "residual_first": 0 if m.get("act1") is not None else 1,
                 "x_dtype": QUANT_TYPES[x.dtype], "x_scale": float(x.scale[0]),
                 "x_zero_point": 0 if fp8 or x.zero_point is None
                 else int(x.zero_point.to(torch.int64)[0]),
                 "w_scale": [float(s) for s in w_scale.float()], "w_zero_point": w_zp}
        if m.get("mid_q") is not None:
            p = m["mid_q.params"]
            attrs.update(mid_scale=p["scale"], mid_zero_point=p["zero_point"], mid_dtype=p["dtype"])
        stored = self.canonical_weight(core, w)
        w_name = wd.source if stored is g.constant(wd.source) else \
            net.add_constant(net.unique_name(f"{wd.source}/quantized"), stored.contiguous().clone())
        inputs = [x.source, w_name, "", ""]
        if parts:
            inputs[2] = net.add_constant(net.unique_name(f"{core.name}/quantized_bias"), sum(parts).clone())
        if "res" in m.binds:
            r, _ = dequant(g, m["res"])
            if r is not None and per_tensor(r, "residual") is None:
                inputs[3] = r.source
                attrs.update(residual_scale=float(r.scale[0]), residual_zero_point=0 if r.zero_point is None or
                             r.dtype == torch.float8_e4m3fn else int(r.zero_point.to(torch.int64)[0]))
            else:
                inputs[3] = m["res"]
        if m.get("out_q") is not None:
            p = m["out_q.params"]
            attrs.update(y_scale=p["scale"], y_zero_point=p["zero_point"], y_dtype=p["dtype"])
        else:
            attrs["y_dtype"] = "float32"
        if "post_bias" in m.binds and not plain_post:
            pb = dequantized_constant(g, m["post_bias"])[0].float().reshape(-1).expand(channels)
            inputs.append(net.add_constant(net.unique_name(f"{core.name}/quantized_post_bias"), pb.clone()))
        while inputs and not inputs[-1]:
            inputs.pop()
        attrs = get_spec(self.fused).resolve_attrs(attrs, f"{core.name}: ")
        return [self.new_layer(g, m, self.fused, inputs, attrs=attrs, suffix="/" + self.fused.lower())]


class QDQConv(QDQFusion):
    """DQ(x)⊛DQ(w) (+b, act, Q/DQ, +r, act) → Q ⇒ QuantizedConv; weights (C_out, C_in/g, k…), channels axis 0."""
    name = "Q(act(DQ(x)⊛DQ(w) + b [+ DQ(r)])) ⇒ QuantizedConv"
    op, fused = "Conv", "QuantizedConv"

    def weight_axis(self, core, w):
        return 0, None


class QDQConvTranspose(QDQFusion):
    """The same around ConvTranspose; weights (C_in, C_out/g, k…): output channels on axis 1 (group 1 only)."""
    name = "Q(act(DQ(x)⊛ᵀDQ(w) + b [+ DQ(r)])) ⇒ QuantizedConvTranspose"
    op, fused = "ConvTranspose", "QuantizedConvTranspose"

    def weight_axis(self, core, w):
        if core.attrs.get("group", 1) != 1:
            return 1, "ConvTranspose with groups: per-channel weight scales would not be along one axis"
        return 1, None

    def core_attrs(self, core):
        return {k: v for k, v in core.attrs.items() if k in (*_CONV_ATTRS, "output_padding", "output_shape")}


class QDQMatMul(QDQFusion):
    """DQ(a)·DQ(w) (+b, act, Q/DQ, +r, act) → Q ⇒ QuantizedMatMul; w a constant (K, N), stored as (N, K)."""
    name = "Q(act(DQ(a)·DQ(w) + b [+ DQ(r)])) ⇒ QuantizedMatMul"
    op, fused = "MatMul", "QuantizedMatMul"

    def weight_axis(self, core, w):
        if w.dim() != 2:
            return 1, f"the weights have rank {w.dim()}; batched weights are not fused"
        return 1, None

    def canonical_weight(self, core, w):
        return w.t()

    def core_attrs(self, core):
        return {}

    def core_check(self, core, g):
        a = g.shape(core.inputs[0])
        return None if a is not None and len(a) >= 2 else f"the activation {core.inputs[0]!r} has rank < 2"


class QDQGemm(QDQMatMul):
    """Gemm(DQ(a), DQ(w), C): α folds into the weight scales, β·C into the bias; transB=1 is the stored layout."""
    name = "Q(act(α·DQ(a)·DQ(w)ᵀ + β·C [+ DQ(r)])) ⇒ QuantizedMatMul"
    op, fused = "Gemm", "QuantizedMatMul"

    def weight_axis(self, core, w):
        return (0 if core.attrs.get("transB", 0) else 1), None

    def canonical_weight(self, core, w):
        return w if core.attrs.get("transB", 0) else w.t()

    def core_check(self, core, g):
        return "Gemm with transA=1" if core.attrs.get("transA", 0) else None


RULES = [QDQConv(), QDQConvTranspose(), QDQMatMul(), QDQGemm(), BlockedWeightMatMul()]
_FUSE = rule_pass(*RULES)


def fuse_qdq(net, shape_points=None, rejections=None, **options) -> int:
    """The pipeline pass: fuse every matching Q/DQ pattern, then log (info) each Q/DQ layer left running as
    written, with the reason its reader was not fused. Returns the number of fused layers."""
    if not any(layer.op in ("QuantizeLinear", "DequantizeLinear") for layer in net.layers):
        return 0                  # a float network: no rule can match, and --verbose stays free of its rejections
    mine: list = []
    changes = _FUSE(net, shape_points=shape_points, rejections=mine, **options)
    if rejections is not None:
        rejections.extend(mine)
    report_unfused(net, mine)
    return changes


def report_unfused(net, rejections) -> list[str]:
    """One build-log line per QuantizeLinear/DequantizeLinear still in `net` (never dropped, never silently
    dequantized): what it reads, who reads it, and the reason a fusion rule gave there (if one reached it)."""
    why = {}
    for r in rejections:
        why.setdefault(r.layer, r.reason)
    users = net.consumers()
    lines = []
    for layer in net.layers:
        if layer.op not in ("QuantizeLinear", "DequantizeLinear"):
            continue
        readers = users.get(layer.outputs[0], [])
        reasons = [f"{u.name} ({u.op}): {why[u.name]}" for u in readers if u.name in why]
        kind = "a constant, folded to float weights" if layer.inputs[0] in net.constants else "computed"
        tail = "; ".join(reasons) if reasons else \
            ", ".join(f"{u.name} ({u.op})" for u in readers) or "a network output"
        lines.append(f"Q/DQ: {layer.op} {layer.name!r} ({kind}) runs as written; read by {tail}")
    log = get_logger()
    for line in lines:
        log.info(line)
    return lines


__all__ = ["RULES", "fuse_qdq", "report_unfused"]
