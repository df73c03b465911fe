"""The next GEMM's Q as a second output of the layer computing its input. LayerNormalization → y, read by a per-tensor
QuantizeLinear (and usually by a float residual Add too) ⇒ LayerNormalizationQuantize → (y, Q(y)); the
QuantizeLinear layer goes.

    ─► LayerNorm ─► y ─┬─► Q(s, z) ─► DQ ─► QKV / FFN GEMM      ⇒     ─► LayerNormQ ─┬─► y ─► Add
                       └─► Add (float residual)                                     └─► Q(y) ─► DQ ─► …

BERT-style INT8/FP8 engines (implicit or Q/DQ) quantize every LayerNorm output before the next GEMM: 24 of
BERT-base's 36 QuantizeLinear kernels. Fused, y is not read back, and one launch goes. Runs after precision
conversion (LATE_PASSES), so the Q reads y in its final dtype, as the fused kernel rounds y before quantizing.
A pre-norm block's AddLayerNormalization (add_layernorm.py: S = a + b, y = LayerNorm(S)) takes the Q the same way:
AddLayerNormalizationQuantize → (y, S, Q(y)) — ViT-B/16 INT8's 12 Qs before its FC1 GEMMs. Where only the Q reads y
the fused layer's first output is absent and y is never written (1 byte per element instead of 2 + 2 + 1).
Attention takes the output projection's Q likewise (AttentionQuantize → (O, Q(O))): BERT-base and ViT-B/16 INT8
quantize every attention output, 12 Qs each, once qdq_hoist.py has moved them above the head-merging views.
Entry point: `fuse_producer_quantize(net, shape_points=..., rejections=None) -> changes`.
"""

from ...ir import Layer, get_spec
from ..pattern import Graph
from .base import record_rejection
from .qdq_params import quantize_params

NAME = "LayerNorm / AddLayerNorm / Attention → Q(y) ⇒ one layer also writing Q(y)"
FUSED = {"LayerNormalization": "LayerNormalizationQuantize", "AddLayerNormalization": "AddLayerNormalizationQuantize",
         "Attention": "AttentionQuantize"}


def _reason(ln: Layer) -> str | None:
    if ln.op == "LayerNormalization" and (len(ln.outputs) != 1 or not ln.outputs[0]):
        return "the LayerNorm also returns Mean/InvStdDev"
    if ln.attrs.get("stash_type", 1) != 1:
        return f"stash_type={ln.attrs.get('stash_type')}"
    return None


def fuse_producer_quantize(net, shape_points=None, rejections=None, **_) -> int:
    """Every LayerNormalization / AddLayerNormalization whose normalised output y a per-tensor QuantizeLinear reads
    becomes the fused op with Q(y) as its last output; y stays an output only where another layer (or the network)
    reads it — absent otherwise, so the kernel does not write it (ViT's LayerNorm → Q before the QKV GEMM, once the
    Q has climbed the Transpose between them: qdq_hoist.py)."""
    g = Graph(net, shape_points)
    users = net.consumers()
    drop: set[int] = set()
    out = []
    for layer in net.layers:
        if layer.op not in FUSED or id(layer) in drop:
            out.append(layer)
            continue
        y = layer.outputs[0] if layer.outputs else None
        qs = [u for u in users.get(y, []) if u.op == "QuantizeLinear" and u.inputs[0] == y] if y else []
        why = _reason(layer) if qs else None
        params = None
        if qs and why is None:
            params, why = quantize_params(g, qs[0])
        if not qs or why:
            if qs:
                record_rejection(NAME, layer.name, why, rejections)
            out.append(layer)
            continue
        attrs = dict(layer.attrs)
        attrs.update(q_scale=params["scale"], q_zero_point=params["zero_point"], q_dtype=params["dtype"])
        y_read = g.is_output(y) or any(u is not qs[0] for u in users.get(y, []))
        outputs = [y if y_read else "", *layer.outputs[1:2], qs[0].outputs[0]]
        if layer.op == "AddLayerNormalization" and len(outputs) == 2:
            outputs.insert(1, "")                 # the sum, absent: nothing reads it
        op = FUSED[layer.op]
        fused = Layer(layer.name, op, list(layer.inputs), outputs, get_spec(op).resolve_attrs(attrs))
        fused.origin = layer.origin + [o for o in qs[0].origin if o not in layer.origin]
        fused.precision, fused.placement = layer.precision, layer.placement
        drop.add(id(qs[0]))
        out.append(fused)
    changed = len(drop)
    net.layers = [la for la in out if id(la) not in drop]
    return changed
