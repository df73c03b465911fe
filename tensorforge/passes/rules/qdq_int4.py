"""Weight-only blocked quantization: MatMul(a, DQ_blocked(w)) [+ b] [act] ⇒ BlockQuantizedMatMul (ir/ops/quantized.py).

Exporters: onnxruntime's `MatMul4BitsQuantizer(quant_format=QDQ)` and other opset-21 weight-only int4 flows
(LLM checkpoints) write the weights as an int4/uint4 constant behind a DequantizeLinear with `block_size`
along K (axis 0 of the (K, N) weight), scales and zero points (⌈K/bs⌉, N); activations stay float.

    w_q (K, N) ─► DQ(axis 0, block_size) ─┐
                             a (…, K) ────┴─► MatMul ─► [+ b] ─► [act] ─► y

The weights stay quantized in the engine (stored (N, K), one value a byte); without this rule constant folding
would expand them to float32. Part of the fuse-qdq pass (passes/rules/qdq.py), before constant folding.
"""

import torch

from ...ir import get_spec
from ...ir.ops.low_precision import as_int, from_int
from ..pattern import AnyOf, Op, Var
from .base import Rule
from .epilogue import per_channel_reason
from .qdq_params import constant_through, dequantized_constant
from .qdq_patterns import ACTIVATION_OPS, activation_of, activations_of

WEIGHT_TYPES = (torch.int4, torch.uint4, torch.int8, torch.uint8)


def blocked_weight(g, name):
    """(w (K, N), scale, zero point, block size) of a blocked DequantizeLinear of a constant, or a reason."""
    layer = g.producer(name)
    if layer is None or layer.op != "DequantizeLinear" or not layer.attrs.get("block_size"):
        return None, f"{name!r} is not a blocked DequantizeLinear"
    w = constant_through(g, layer.inputs[0])
    s = constant_through(g, layer.inputs[1]) if len(layer.inputs) > 1 else None
    zp = constant_through(g, layer.inputs[2]) if len(layer.inputs) > 2 and layer.inputs[2] else None
    if w is None or s is None or (len(layer.inputs) > 2 and layer.inputs[2] and zp is None):
        return None, f"DequantizeLinear {layer.name!r} reads computed tensors"
    if w.dtype not in WEIGHT_TYPES or w.dim() != 2 or layer.attrs.get("axis", 1) % 2 != 0:
        return None, f"DequantizeLinear {layer.name!r}: {w.dtype} rank {w.dim()} blocked on axis {layer.attrs.get('axis')}"
    if not s.dtype.is_floating_point or s.dim() != 2 or s.shape[1] != w.shape[1]:
        return None, f"DequantizeLinear {layer.name!r}: scales of shape {tuple(s.shape)}"
    return (w, s, zp, int(layer.attrs["block_size"])), None


def _weight(g, name):
    return blocked_weight(g, name)[1]


def _float(g, name):
    dt = g.dtype(name)
    return None if dt is not None and dt.is_floating_point else f"{name!r} is {dt}"


def _bias(g, name):
    return dequantized_constant(g, name)[1]


_core = Op("MatMul", Var("a", _float), Var("w", _weight), name="core")
_biased = AnyOf(Op("Add", _core, Var("bias", _bias), name="bias_add"), _core)


def _pattern():
    return AnyOf(*activations_of(_biased, "act2"), _biased)


class BlockedWeightMatMul(Rule):
    name = "act(a · DQ_blocked(w) + b) ⇒ BlockQuantizedMatMul"
    anchor = "MatMul"

    def __init__(self):
        self.pattern = _pattern()
        self.roots = {"MatMul", "Add", "Clip", "Mul", *ACTIVATION_OPS}

    def check(self, m, g):
        shape = g.shape(m["core"].outputs[0])
        if shape is None or len(shape) < 2 or not g.same_shape(m["core"].outputs[0], m.root.outputs[0]):
            return "the output shape is unknown or the epilogue broadcasts it"
        if "bias" in m.binds:
            why = per_channel_reason(dequantized_constant(g, m["bias"])[0], "Gemm", len(shape), shape[-1])
            if why:
                return f"bias {m['bias']!r}: {why}"
        return None

    def rewrite(self, m, g):
        net = g.net
        (w, s, zp, bs), _ = blocked_weight(g, m["w"])
        stored = from_int(as_int(w).t().contiguous(), w.dtype)
        inputs = [m["a"], net.add_constant(net.unique_name(f"{m['w']}/blocked"), stored),
                  net.add_constant(net.unique_name(f"{m['w']}/block_scale"), s.t().contiguous()), "", ""]
        if zp is not None:
            inputs[3] = net.add_constant(net.unique_name(f"{m['w']}/block_zero_point"),
                                         from_int(as_int(zp).t().contiguous(), zp.dtype))
        if "bias" in m.binds:
            b = dequantized_constant(g, m["bias"])[0].float().reshape(-1).expand(w.shape[1])
            inputs[4] = net.add_constant(net.unique_name(f"{m['core'].name}/bias"), b.clone())
        act, alpha, beta = activation_of(m, "act2")
        attrs = get_spec("BlockQuantizedMatMul").resolve_attrs(
            {"block_size": bs, "activation": act, "alpha": alpha, "beta": beta})
        while inputs and not inputs[-1]:
            inputs.pop()
        return [self.new_layer(g, m, "BlockQuantizedMatMul", inputs, attrs=attrs, suffix="/block_quantized")]
