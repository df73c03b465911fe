"""Epilogue ops found after the first Q/DQ fusion join the quantized op: Q(act(Quantized*(…) [+ b])) ⇒ one op.
Entry point: `fuse_quantized_epilogues(net, shape_points=..., rejections=None) -> changes`.

fuse-qdq runs before constant folding, so it sees activations as the exporter wrote them: torch's GELU is an
Erf chain (opset < 20) until fuse-gelu makes it one Gelu op. This rule runs after the activation rules and moves
what follows a quantized op with a float output and an empty epilogue — a per-channel bias Add, an activation,
and the next layer's QuantizeLinear — into it (implicit INT8 and ModelOpt BERT FFNs: MatMul + bias → GELU → Q).

    Quantized*(x, w [, b]) ─► [+ b₂] ─► [act] ─► [Q] ─► y      ⇒      Quantized*(x, w, b + b₂; act, Q) ─► y

A row reshape between a QuantizedMatMul and its epilogue (GPT-2's Conv1D: `addmm(b, x.view(-1, K), W).view(…, N)`,
a Gemm between Reshapes that fuse-qdq made quantized before gemm-through-reshape could see it) keeps the last axis,
so every epilogue op above is the same per-row map before or after it; the reshape moves below the fused op:

    QuantizedMatMul (M, N) ─► [Reshape] ─► [+ b₂] ─► [act] ─► [Reshape] ─► [Q]   ⇒   QuantizedMatMul(…; act, Q) ─► Reshape
GPT-2 INT8's FC1 + GELU(tanh) + Q: one kernel instead of the GEMM and a GELU+Q chain (the (M, 3072) fp16 hidden
tensor written and read once more: 4 bytes per element).
"""

from ..pattern import AnyOf, Const, Op, Var
from .base import Rule, rule_pass
from .epilogue import per_channel_reason
from .qdq_patterns import ACTIVATION_OPS, activation_of, activations_of, quantize_of
from .qdq_params import dequantized_constant, quantize_params
from .qdq_pool import quantize_before_maxpool

FUSED = "QuantizedConv|QuantizedConvTranspose|QuantizedMatMul"


def _known_float(g, name):
    return dequantized_constant(g, name)[1]


_core = Op(FUSED, any_inputs=True, name="core")
_rows = AnyOf(Op("Reshape", _core, Const(name="rows_shape", scalar=False), name="rows"), _core)
_biased = AnyOf(Op("Add", _rows, Var("bias", _known_float), name="bias_add"), _rows)
_act = AnyOf(*activations_of(_biased, "act2"), _biased)
_act_rows = AnyOf(Op("Reshape", _act, Const(name="rows2_shape", scalar=False), name="rows2"), _act)
PATTERN = AnyOf(quantize_of(_act_rows, "out_q"), _act)


class QuantizedEpilogue(Rule):
    name = "Q(act(Quantized*(x, w) + b)) ⇒ Quantized*(x, w; b, act, Q)"
    anchor = set(FUSED.split("|"))
    roots = {"QuantizeLinear", "Add", "Clip", "Mul", *ACTIVATION_OPS}
    pattern = PATTERN

    def check(self, m, g):
        core = m["core"]
        a = core.attrs
        if core is m.root:
            return "nothing to fuse"
        if a["y_scale"] or a.get("out2_scale") or len(core.outputs) != 1:
            return f"{core.name!r} already writes a quantized output"
        if a["activation"] != "none" or a["mid_scale"] or len(core.inputs) > 3:
            return f"{core.name!r} already has an epilogue (activation, Q/DQ, residual or post-bias)"
        shape = g.shape(core.outputs[0])
        last = core
        for key in ("rows", "rows2"):
            if m.get(key) is not None:
                why = _rows_reason(g, core, m[key], m[key + "_shape.value"], moved=key == "rows2")
                if why:
                    return why
                last = m[key]
        if shape is None or not g.same_shape(last.outputs[0], m.root.outputs[0]):
            return "the output shape is unknown or the epilogue broadcasts it"
        channels = shape[1] if core.op != "QuantizedMatMul" else shape[-1]
        if "bias" in m.binds:
            b, _ = dequantized_constant(g, m["bias"])
            why = per_channel_reason(b, "Conv" if core.op != "QuantizedMatMul" else "Gemm", len(shape), channels)
            if why:
                return f"bias {m['bias']!r}: {why}"
        if m.get("out_q") is not None:
            p, why = quantize_params(g, m["out_q"])
            if why:
                return why
            m.binds["out_q.params"] = p
        m.binds["channels"] = channels
        return None

    def rewrite(self, m, g):
        net, core = g.net, m["core"]
        inputs = list(core.inputs) + [""] * (3 - len(core.inputs))
        if "bias" in m.binds:
            b = dequantized_constant(g, m["bias"])[0].float().reshape(-1).expand(m["channels"])
            if inputs[2]:
                b = b + net.constants[inputs[2]].float().reshape(-1)
            inputs[2] = net.add_constant(net.unique_name(f"{core.name}/epilogue_bias"), b.clone())
        act, alpha, beta = activation_of(m, "act2")
        attrs = {**core.attrs, "activation": act, "alpha": alpha, "beta": beta, "residual_first": 1}
        if m.get("out_q") is not None:
            p = m["out_q.params"]
            attrs.update(y_scale=p["scale"], y_zero_point=p["zero_point"], y_dtype=p["dtype"])
        while inputs and not inputs[-1]:
            inputs.pop()
        rows = m.get("rows2") or m.get("rows")      # the last reshape gives the root's shape
        if rows is None:
            return [self.new_layer(g, m, core.op, inputs, attrs=attrs, suffix="/epilogue")]
        flat = self.fresh_tensor(g, f"{core.outputs[0]}/epilogue")
        fused = self.new_layer(g, m, core.op, inputs, outputs=[flat], attrs=attrs, suffix="/epilogue")
        return [fused, self.new_layer(g, m, "Reshape", [flat, rows.inputs[1]], attrs=dict(rows.attrs),
                                      suffix="/rows")]


def _rows_reason(g, core, rows, target, moved: bool) -> str | None:
    """Why the Reshape after `core` is not a pure row reshape (same last axis, so the epilogue commutes with it).
    `moved`: the reshape will read the fused GEMM's (M, N) output instead of its own input, so a 0 in its shape
    (ONNX: copy that dimension of the input) would copy another dimension."""
    if core.op != "QuantizedMatMul":
        return f"a Reshape after {core.op} {core.name!r} (only a QuantizedMatMul's rows are reshaped through)"
    before, after = g.shape(core.outputs[0]), g.shape(rows.outputs[0])
    if before is None or after is None:
        return f"Reshape {rows.name!r}: shapes unknown"
    if not before or not after or before[-1] != after[-1]:
        return f"Reshape {rows.name!r} changes the last axis ({before} → {after}): the epilogue is per column"
    if moved and not rows.attrs.get("allowzero", 0) and bool((target == 0).any()):
        return f"Reshape {rows.name!r} copies input dimensions (0 in its shape) from a tensor the fusion replaces"
    return None


RULES = [QuantizedEpilogue()]
_FUSE = rule_pass(*RULES)


def fuse_quantized_epilogues(net, shape_points=None, rejections=None, **options) -> int:
    """The pipeline pass (only when the network has Q/DQ or quantized ops): MaxPools moved onto int8 codes first
    (qdq_pool.py), then the epilogue rule."""
    if not any(layer.op in anchor_ops() or layer.op == "QuantizeLinear" for layer in net.layers):
        return 0
    moved = quantize_before_maxpool(net, shape_points=shape_points, rejections=rejections)
    return moved + _FUSE(net, shape_points=shape_points, rejections=rejections, **options)


def anchor_ops() -> set[str]:
    return set(FUSED.split("|"))
