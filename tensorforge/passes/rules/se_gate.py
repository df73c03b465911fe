"""Mul(x, gate) → 1×1 Conv / FusedConv ⇒ GatedConv: a squeeze-excite gate applied as the projection reads x.

MobileNetV3 and EfficientNet (torchvision's SqueezeExcitation, timm's SEModule, every exporter) end each inverted
residual block with

    x ──► GlobalAveragePool ─► FC ─► act ─► FC ─► σ ──► gate (N, C, 1, 1)
    x ────────────────────────────────────────────────► Mul(x, gate) ─► Conv 1×1 (+ bias [+ residual]) ─► y

Unfused, the Mul writes x ⊙ gate (N·C·H·W elements) and the projection reads it back: EfficientNet-B0 at batch
32 spent 77.8 µs of its 1146.7 µs of kernels in these 16 Mul launches (H200 kernel profile, bench/results). A 1×1
convolution is the GEMM Y (N·H·W, O) = X (N·H·W, C)·Wᵀ, so the gate scales A's elements as the GEMM loads them,
g[n(row), c]: GatedConv(x, gate, w, bias, residual) never writes x ⊙ gate.
Runs after precision conversion (LATE_PASSES, before pointwise chains): the Mul, the gate and the convolution
then carry their final dtypes, which must agree (a precision boundary between them keeps them apart), and a
projection quantized by INT8/FP8 reads a QuantizeLinear, not the Mul, so it is left to the quantized kernels.
Only 1×1, stride-1, unpadded, ungrouped convolutions: the fused kernel is the GEMM's (kernels/
triton_gated_conv1x1.py); elsewhere GatedConv would only move the Mul into the layer.
"""

from ...ir import Layer, Network
from ...ir.ops.conv import pointwise_conv_reason
from ..pattern import Graph
from .base import record_rejection, splice_layers

RULE_NAME = "Conv1×1(x ⊙ gate) ⇒ GatedConv(x, gate)"


def _operands(g: Graph, mul: Layer) -> tuple[str, str] | str:
    """(x, gate) of the Mul — gate is the (N or 1, C, 1, 1) operand, x the full (N, C, H, W) one — or the reason
    the Mul is not a per-sample channel gate."""
    if len(mul.inputs) != 2:
        return "not a two-input Mul"
    shapes = [g.shape(t) for t in mul.inputs]
    if any(s is None or len(s) != 4 for s in shapes):
        return f"operand shapes {shapes}: not two 4-D tensors of known shape"
    dtypes = {g.dtype(t) for t in mul.inputs} | {g.dtype(mul.outputs[0])}
    if len(dtypes) != 1 or not next(iter(dtypes)).is_floating_point:
        return f"operand dtypes {sorted(map(str, dtypes))}: not one floating-point dtype"
    for x, gate in (mul.inputs, mul.inputs[::-1]):
        xs, gs = g.shape(x), g.shape(gate)
        if g.constant(gate) is None and gs[2:] == (1, 1) and gs[1] == xs[1] and gs[0] in (1, xs[0]) \
                and g.same_shape(x, mul.outputs[0]) and (xs[2], xs[3]) != (1, 1):
            return x, gate
    return f"operand shapes {shapes}: not x (N, C, H, W) times a computed gate (N, C, 1, 1)"


def _match(g: Graph, conv: Layer, mul: Layer | None) -> tuple[str, str] | str:
    """(x, gate) when Mul(x, gate) → `conv` becomes a GatedConv, else the reason it does not."""
    if mul is None or mul.op != "Mul":
        return f"its input is produced by {mul.op if mul else 'no layer'}, not by a Mul"
    w = g.constant(conv.inputs[1]) if len(conv.inputs) > 1 else None
    if w is None:
        return "the convolution weights are computed at run time"
    why = pointwise_conv_reason(conv.attrs, tuple(w.shape))
    if why:
        return why
    if len(conv.inputs) > 4:
        return "a PRelu epilogue (slope input): GatedConv has none"
    if len(g.consumers(mul.outputs[0])) != 1 or g.is_output(mul.outputs[0]):
        return "the gated tensor x ⊙ gate has other readers (it would still be written)"
    return _operands(g, mul)


def fuse_se_gate(net: Network, shape_points: list[dict] | None = None, max_fold_elements: int = 1 << 24,
                 rejections: list | None = None, **_) -> int:
    """Replace each (Mul(x, gate) → 1×1 Conv/FusedConv) by GatedConv(x, gate, w, bias, residual…) at the
    convolution's position; the Mul goes (the convolution was its only reader)."""
    g = Graph(net, shape_points or [], max_fold_elements)
    replace: dict[int, Layer] = {}
    drop: set[int] = set()
    for conv in net.layers:
        if conv.op not in ("Conv", "FusedConv") or not conv.inputs:
            continue
        mul = g.producer(conv.inputs[0])
        found = _match(g, conv, mul)
        if isinstance(found, str):
            if mul is not None and mul.op == "Mul":       # only convolutions behind a Mul are worth a line
                record_rejection(RULE_NAME, conv.name, found, rejections)
            continue
        x, gate = found
        rest = list(conv.inputs[1:])
        attrs = dict(conv.attrs)
        if conv.op == "Conv":       # Conv(x, w[, b]): its bias is the epilogue's
            attrs.update(activation="none", alpha=0.0, beta=0.0, residual_first=0)
        origin = mul.origin + [o for o in conv.origin if o not in mul.origin]
        replace[id(conv)] = Layer(net.unique_name(f"{conv.name}/gated"), "GatedConv", [x, gate] + rest,
                                  list(conv.outputs), attrs, origin, precision=conv.precision)
        drop.add(id(mul))
    return splice_layers(net, replace, drop, RULE_NAME)
