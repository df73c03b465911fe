"""The next GEMM's Q as a second output of a LayerNorm: LayerNormalization → y, read by a per-tensor
QuantizeLinear (and usually by a float residual Add too) ⇒ LayerNormalizationQuantize → (y, Q(y)); the
QuantizeLinear layer goes.

    ─► LayerNorm ─► y ─┬─► Q(s, z) ─► DQ ─► QKV / FFN GEMM      ⇒     ─► LayerNormQ ─┬─► y ─► Add
                       └─► Add (float residual)                                     └─► Q(y) ─► DQ ─► …

BERT-style INT8/FP8 engines (implicit or Q/DQ) quantize every LayerNorm output before the next GEMM: 24 of
BERT-base's 36 QuantizeLinear kernels. Fused, y is not read back, and one launch goes. Runs after precision
conversion (LATE_PASSES), so the Q reads y in its final dtype, as the fused kernel rounds y before quantizing.
Entry point: `fuse_layernorm_quantize(net, shape_points=..., rejections=None) -> changes`.
"""

from ...ir import Layer, get_spec
from ..pattern import Graph
from .base import record_rejection
from .qdq_params import quantize_params

NAME = "LayerNorm → Q(y) ⇒ LayerNormalizationQuantize (y, Q(y))"


def _reason(ln: Layer) -> str | None:
    if len(ln.outputs) != 1 or not ln.outputs[0]:
        return "the LayerNorm also returns Mean/InvStdDev"
    if ln.attrs.get("stash_type", 1) != 1:
        return f"stash_type={ln.attrs.get('stash_type')}"
    return None


def fuse_layernorm_quantize(net, shape_points=None, rejections=None, **_) -> int:
    g = Graph(net, shape_points)
    users = net.consumers()
    drop: set[int] = set()
    out = []
    for layer in net.layers:
        if layer.op != "LayerNormalization" or id(layer) in drop:
            out.append(layer)
            continue
        y = layer.outputs[0] if layer.outputs else None
        qs = [u for u in users.get(y, []) if u.op == "QuantizeLinear" and u.inputs[0] == y]
        why = _reason(layer) if qs else None
        params = None
        if qs and why is None:
            params, why = quantize_params(g, qs[0])
        if not qs or why:
            if qs:
                record_rejection(NAME, layer.name, why, rejections)
            out.append(layer)
            continue
        attrs = {k: layer.attrs[k] for k in ("axis", "epsilon", "stash_type") if k in layer.attrs}
        attrs.update(q_scale=params["scale"], q_zero_point=params["zero_point"], q_dtype=params["dtype"])
        fused = Layer(layer.name, "LayerNormalizationQuantize", list(layer.inputs), [y, qs[0].outputs[0]],
                      get_spec("LayerNormalizationQuantize").resolve_attrs(attrs))
        fused.origin = layer.origin + [o for o in qs[0].origin if o not in layer.origin]
        fused.precision, fused.placement = layer.precision, layer.placement
        drop.add(id(qs[0]))
        out.append(fused)
    changed = len(drop)
    net.layers = [la for la in out if id(la) not in drop]
    return changed
