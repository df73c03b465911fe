"""MatMulEpilogue → MatMulEpilogue (narrow hidden layer, few rows) ⇒ TwoLayerMLP: a squeeze-excite MLP in one layer.

Squeeze-excite blocks (MobileNetV3, EfficientNet; torchvision's SqueezeExcitation, timm's SEModule) pool to
(N, C, 1, 1) and run two 1×1 convolutions, C → H → C with H ≤ C/4, which conv_as_gemm.py turns into

    Reshape(−1, C) ─► MatMulEpilogue(W1, b1, act1) ─► MatMulEpilogue(W2, b2, act2) ─► Reshape(−1, C, 1, 1)

At batch 1 each GEMM is a few-microsecond launch over ~C·H weights: the launches, not the arithmetic, are the
cost (EfficientNet-B0 at batch 1: 32 launches, 82.3 µs of its 388.5 µs of kernels on the H200). TwoLayerMLP
computes both in one launch (kernels/triton_mlp2.py), and its other tactics run the two GEMMs as before
(kernels/mlp_pair.py), so timing keeps the better. Conditions: the first GEMM reads a pooled image (N, C, 1, 1)
through a view (Reshape/Flatten/Squeeze: the squeeze-excite form; other MLPs — transformer FFNs, classifier heads —
keep their two GEMMs, each with its own timed tactic); the first product's only reader is the second; no residual
in either; constant 2-D weights; hidden width ≤ 256 (the fused kernel keeps h in registers); at most 256 rows at
every shape point.
Runs after precision conversion (LATE_PASSES): both layers carry their final dtypes, which must agree, and
quantized layers (QuantizedMatMul) are not MatMulEpilogue.
"""

from ...ir import Layer, Network
from ...ir.ops.fused import MLP_LAYER_ATTRS, MLP_MAX_HIDDEN as MAX_HIDDEN, MLP_MAX_ROWS as MAX_ROWS
from ..pattern import Graph
from .base import record_rejection, splice_layers

RULE_NAME = "MatMulEpilogue(MatMulEpilogue(a)) ⇒ TwoLayerMLP"


def _reason(g: Graph, first: Layer | None, second: Layer) -> str | None:
    if first is None or first.op != "MatMulEpilogue":
        return f"its input is produced by {first.op if first else 'no layer'}, not by a MatMulEpilogue"
    view = g.producer(first.inputs[0])
    pooled = g.shape(view.inputs[0]) if view is not None and view.op in ("Reshape", "Flatten", "Squeeze") else None
    if pooled is None or len(pooled) != 4 or pooled[2:] != (1, 1):
        return "the first GEMM does not read a pooled image (N, C, 1, 1) through a view: not a squeeze-excite MLP"
    h = first.outputs[0]
    if len(g.consumers(h)) != 1 or g.is_output(h):
        return "the hidden product has other readers"
    for layer in (first, second):
        if len(layer.inputs) > 3 and layer.inputs[3]:
            return f"{layer.name} adds a residual"
        w = g.constant(layer.inputs[1])
        if w is None or w.dim() != 2:
            return f"{layer.name}'s weight is not a constant matrix"
        if len(layer.inputs) > 2 and layer.inputs[2] and g.constant(layer.inputs[2]) is None:
            return f"{layer.name}'s bias is computed at run time"
    w1 = g.constant(first.inputs[1])
    hidden = int(w1.shape[0] if first.attrs.get("trans_b", 0) else w1.shape[1])
    if hidden > MAX_HIDDEN:
        return f"hidden width {hidden} > {MAX_HIDDEN}"
    dtypes = {g.dtype(first.inputs[0]), g.dtype(h), g.dtype(second.outputs[0])}
    if len(dtypes) != 1 or None in dtypes or not next(iter(dtypes)).is_floating_point:
        return f"dtypes {sorted(map(str, dtypes))}: not one floating-point dtype"
    values = g.values(first.inputs[0])
    if values is None:
        return "the input's shape is unknown"
    rows = max(v.numel() // max(1, v.shape[-1]) for v in values)
    if rows > MAX_ROWS:
        return f"{rows} rows > {MAX_ROWS}: a batch-sized product is what one launch per row serves"
    return None


def fuse_two_layer_mlp(net: Network, shape_points: list[dict] | None = None, max_fold_elements: int = 1 << 24,
                       rejections: list | None = None, **_) -> int:
    """Replace each (MatMulEpilogue → MatMulEpilogue) that qualifies by one TwoLayerMLP at the second's position."""
    g = Graph(net, shape_points or [], max_fold_elements)
    replace: dict[int, Layer] = {}
    drop: set[int] = set()
    for second in net.layers:
        if second.op != "MatMulEpilogue":
            continue
        first = g.producer(second.inputs[0])
        if first is None or first.op != "MatMulEpilogue":
            continue            # not a pair: nothing worth a line
        why = _reason(g, first, second)
        if why is None and (id(first) in replace or id(first) in drop):
            why = "the first layer already ends another pair"
        if why:
            record_rejection(RULE_NAME, second.name, why, rejections)
            continue
        ins = [(list(layer.inputs) + ["", ""])[:3] for layer in (first, second)]
        attrs = {f"{k}{i}": layer.attrs.get(k, default) for i, layer in ((1, first), (2, second))
                 for k, default in MLP_LAYER_ATTRS.items()}
        inputs = ins[0] + ins[1][1:]
        while inputs and not inputs[-1]:
            inputs.pop()
        origin = first.origin + [o for o in second.origin if o not in first.origin]
        replace[id(second)] = Layer(net.unique_name(f"{second.name}/mlp2"), "TwoLayerMLP", inputs,
                                    list(second.outputs), attrs, origin, precision=second.precision)
        drop.add(id(first))
    return splice_layers(net, replace, drop, RULE_NAME)
