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
Float convolutions the same way, in a second pass after conv-pool (`fuse_conv_quantize`): FusedConv → Q(y) ⇒
FusedConvQuantize (the Q in the conv epilogue), FusedConvPool → Q(P) ⇒ FusedConvPoolQuantize (squeeze-excite's
pooled vector, quantized by the pooling pass) — MobileNetV3's depthwise convolutions stay float under INT8.
Entry points: `fuse_producer_quantize(net, shape_points=..., rejections=None) -> changes`, `fuse_conv_quantize`.
"""

from ...ir import Layer, get_spec
from ..pattern import Graph
from .base import record_rejection
from .qdq_params import quantize_params

NAME = "LayerNorm / AddLayerNorm / Attention / FusedConv(Pool) → Q(y) ⇒ one layer also writing Q(y)"
# op → (fused op, index of the output the Q reads)
FUSED = {"LayerNormalization": ("LayerNormalizationQuantize", 0),
         "AddLayerNormalization": ("AddLayerNormalizationQuantize", 0),
         "Attention": ("AttentionQuantize", 0)}
OUTPUTS = {"AddLayerNormalization": 2, "FusedConvPool": 2}     # outputs before the Q's (absent ones as "")
# after conv-pool (pipeline.py): a FusedConv read by a GlobalAveragePool must first become a FusedConvPool
CONV_FUSED = {"FusedConv": ("FusedConvQuantize", 0), "FusedConvPool": ("FusedConvPoolQuantize", 1)}


def _reason(ln: Layer) -> str | None:
    if ln.op == "LayerNormalization" and (len(ln.outputs) != 1 or not ln.outputs[0]):
        return "the LayerNorm also returns Mean/InvStdDev"
    if ln.attrs.get("stash_type", 1) != 1:
        return f"stash_type={ln.attrs.get('stash_type')}"
    return None


def fuse_producer_quantize(net, shape_points=None, rejections=None, fused: dict | None = None, **_) -> int:
    """Every layer of an op in `fused` (default FUSED) whose output y a per-tensor QuantizeLinear reads becomes the
    fused op with Q(y) as its last output; y stays an output only where another layer (or the network) reads it —
    absent otherwise, so the kernel does not write it (ViT's LayerNorm → Q before the QKV GEMM, once the Q has
    climbed the Transpose between them: qdq_hoist.py)."""
    fused = FUSED if fused is None else fused
    g = Graph(net, shape_points)
    users = net.consumers()
    drop: set[int] = set()
    out = []
    for layer in net.layers:
        if layer.op not in fused or id(layer) in drop:
            out.append(layer)
            continue
        op, index = fused[layer.op]
        y = layer.outputs[index] if len(layer.outputs) > index else None
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
        outputs = list(layer.outputs) + [""] * (OUTPUTS.get(layer.op, 1) - len(layer.outputs))   # absent ones named
        outputs[index] = y if y_read else ""
        outputs.append(qs[0].outputs[0])
        new = Layer(layer.name, op, list(layer.inputs), outputs, get_spec(op).resolve_attrs(attrs))
        new.origin = layer.origin + [o for o in qs[0].origin if o not in layer.origin]
        new.precision, new.placement = layer.precision, layer.placement
        drop.add(id(qs[0]))
        out.append(new)
    changed = len(drop)
    net.layers = [la for la in out if id(la) not in drop]
    return changed


def fuse_conv_quantize(net, shape_points=None, rejections=None, **options) -> int:
    """fuse_producer_quantize for FusedConv and FusedConvPool (run after conv-pool)."""
    return fuse_producer_quantize(net, shape_points, rejections, fused=CONV_FUSED)
