"""Importers for onnxruntime contrib ops (domain com.microsoft, version 1), the ones its transformer optimizer and
quantizer write. onnx ships no schema for this domain, so attribute defaults are onnxruntime's
(docs/ContribOperators.md), written here. Same math as existing IR ops → those ops (the passes then fuse them as
for any exporter); new math → ir/ops/contrib.py.

    FastGelu(x, bias?)              Add → Gelu(tanh)            BiasGelu(a, b)   Add → Gelu(erf)
    QuickGelu(x; alpha=1.702)       x · Sigmoid(alpha · x)      Gelu(x)          Gelu(erf)
    SkipLayerNormalization(x, skip, γ, β?, bias?; epsilon)  s = x + skip (+ bias) → LayerNormalization(s, γ, β);
                                    outputs: y and (4th) s; mean / inv_std_var outputs are refused
    FusedMatMul(A, B; alpha, transA, transB)  Transpose of the last two axes → MatMul → · alpha
    Attention(x, W, bias?, mask_index?; num_heads, …)  x·W + bias → Split Q, K, V → OnnxAttention (3-D, num_heads),
                                    a (B, S) 0/1 mask as a boolean key mask, unidirectional → is_causal; past/present,
                                    attention_bias and 1-D/3-D mask_index are refused
    RotaryEmbedding(x, position_ids (B, S), cos, sin)  → the ONNX RotaryEmbedding op (same rotation)
    EmbedLayerNormalization  Gather(word, ids) + Gather(position, position_ids or 0..S−1) (+ Gather(segment, seg))
                                    → LayerNormalization; mask_index = Σ mask per row (int32); embedding_sum output
    MatMulNBits(A, B, scales, zp?, g_idx?, bias?)  its own IR op (ir/ops/contrib.py); g_idx (act order) refused
    QLinearAdd/Mul/Sigmoid/GlobalAveragePool/Concat  DequantizeLinear → the float op → QuantizeLinear (the Q/DQ
                                    passes then fuse or keep them, as for QDQ-format models)
    MatMulIntegerToFloat            its own IR op (ir/ops/contrib.py)
    DynamicQuantizeMatMul(A, B, b_scale, b_zp?, bias?)  DynamicQuantizeLinear(A) → MatMulIntegerToFloat
"""

import torch

from ...util.errors import UnsupportedOpError
from ..registry import importer

MS = "com.microsoft"

# contrib ops onnxruntime's tools emit that have no importer yet, and why (docs/operators.md lists them)
NOT_SUPPORTED = {
    "QLinearLeakyRelu / QLinearSoftmax / QLinearAveragePool / QLinearWhere": "other QOperator-format ops; not done yet",
}


def _present(inputs, i):
    return len(inputs) > i and bool(inputs[i])


def _refuse(node, what, hint):
    raise UnsupportedOpError(f"{node.where()}: {what}", hint)


def _scalar_like(ctx, value, ref):
    info = ctx.info(ref)
    dt = info.dtype if info is not None and info.dtype is not None and info.dtype.is_floating_point else torch.float32
    return ctx.const(torch.tensor(value, dtype=dt))


@importer("FastGelu", versions=(1,), domain=MS)
def import_fast_gelu(ctx, node, inputs):
    """Add(bias) → Gelu(tanh)."""
    x = ctx.add1("Add", [inputs[0], inputs[1]]) if _present(inputs, 1) else inputs[0]
    return [ctx.add1("Gelu", [x], {"approximate": "tanh"})]


@importer("BiasGelu", versions=(1,), domain=MS)
def import_bias_gelu(ctx, node, inputs):
    """Add → Gelu(erf)."""
    return [ctx.add1("Gelu", [ctx.add1("Add", inputs[:2])], {"approximate": "none"})]


@importer("Gelu", versions=(1,), domain=MS)
def import_ms_gelu(ctx, node, inputs):
    """Gelu(erf)."""
    return [ctx.add1("Gelu", inputs[:1], {"approximate": "none"})]


@importer("QuickGelu", versions=(1,), domain=MS)
def import_quick_gelu(ctx, node, inputs):
    """x · Sigmoid(alpha · x)."""
    alpha = float(node.attrs.get("alpha", 1.702))
    scaled = ctx.add1("Mul", [inputs[0], _scalar_like(ctx, alpha, inputs[0])])
    return [ctx.add1("Mul", [inputs[0], ctx.add1("Sigmoid", [scaled])])]


@importer("SkipLayerNormalization", versions=(1,), domain=MS)
def import_skip_layer_norm(ctx, node, inputs):
    """x + skip (+ bias) → LayerNormalization; outputs 0 and 3 (mean/inv_std refused)."""
    outs = list(node.outputs) + [""] * 4
    if outs[1] or outs[2]:
        _refuse(node, "the mean / inv_std_var outputs of SkipLayerNormalization are not supported",
                "they are training outputs; re-run the optimizer for inference (only outputs 0 and 3 are used)")
    s = ctx.add1("Add", [inputs[0], inputs[1]])
    if _present(inputs, 4):
        s = ctx.add1("Add", [s, inputs[4]])
    ln_in = [s, inputs[2]] + ([inputs[3]] if _present(inputs, 3) else [])
    attrs = {"axis": -1, "epsilon": float(node.attrs.get("epsilon", 1e-12)), "stash_type": 1}
    y = ctx.add("LayerNormalization", ln_in, attrs, num_outputs=1)[0]
    return [y, "", "", s][:max(1, len(node.outputs))]


def _swap_last(ctx, name, node, which):
    info = ctx.info(name)
    if info is None or info.shape is None:
        _refuse(node, f"{which} has an unknown rank; FusedMatMul's transpose needs it", "give the model static ranks")
    r = len(info.shape)
    perm = list(range(r - 2)) + [r - 1, r - 2]
    return ctx.add1("Transpose", [name], {"perm": perm})


@importer("FusedMatMul", versions=(1,), domain=MS)
def import_fused_matmul(ctx, node, inputs):
    """Transpose (transA/transB) → MatMul → · alpha; transBatch refused."""
    a_attr = node.attrs
    if a_attr.get("transBatchA", 0) or a_attr.get("transBatchB", 0):
        _refuse(node, "FusedMatMul with transBatchA/transBatchB is not supported",
                "only transA/transB (the last two axes) are; the transformer optimizer does not emit transBatch")
    a = _swap_last(ctx, inputs[0], node, "A") if a_attr.get("transA", 0) else inputs[0]
    b = _swap_last(ctx, inputs[1], node, "B") if a_attr.get("transB", 0) else inputs[1]
    y = ctx.add1("MatMul", [a, b])
    alpha = float(a_attr.get("alpha", 1.0))
    return [y if alpha == 1.0 else ctx.add1("Mul", [y, _scalar_like(ctx, alpha, inputs[0])])]


@importer("MatMulIntegerToFloat", versions=(1,), domain=MS)
def import_matmul_integer_to_float(ctx, node, inputs):
    """((A − a_zp)(B − b_zp)) · a_scale · b_scale + bias (own IR op)."""
    return [ctx.add1("MatMulIntegerToFloat", list(inputs))]


@importer("DynamicQuantizeMatMul", versions=(1,), domain=MS)
def import_dynamic_quantize_matmul(ctx, node, inputs):
    """DynamicQuantizeLinear(A) (uint8, per tensor, as onnxruntime) → MatMulIntegerToFloat."""
    aq, a_scale, a_zp = ctx.add("DynamicQuantizeLinear", [inputs[0]], num_outputs=3)
    b_zp = inputs[3] if _present(inputs, 3) else ""
    bias = inputs[4] if _present(inputs, 4) else ""
    args = [aq, inputs[1], a_scale, inputs[2], a_zp, b_zp, bias]
    while args and not args[-1]:
        args.pop()
    return [ctx.add1("MatMulIntegerToFloat", args)]


@importer("Attention", versions=(1,), domain=MS)
def import_ms_attention(ctx, node, inputs):
    """x·W + bias → Q, K, V → OnnxAttention; (B, S) key mask; unidirectional → causal."""
    a = node.attrs
    if any(_present(inputs, i) for i in (4, 5, 6)) or len([o for o in node.outputs if o]) > 1:
        _refuse(node, "Attention with past/present state, attention_bias or past_sequence_length is not supported",
                "export without a KV cache (the encoder form) or use ONNX Attention-23")
    heads = int(a["num_heads"])
    qkv = ctx.add1("MatMul", inputs[:2])
    if _present(inputs, 2):
        qkv = ctx.add1("Add", [qkv, inputs[2]])
    w = ctx.constant_value(inputs[1])
    sizes = list(a.get("qkv_hidden_sizes") or [])
    if not sizes:
        if w is None:
            _refuse(node, "Attention weights are not a constant and qkv_hidden_sizes is absent",
                    "give qkv_hidden_sizes or constant weights")
        sizes = [w.shape[-1] // 3] * 3
    if sizes[0] != sizes[1]:
        _refuse(node, f"Q and K hidden sizes differ ({sizes[0]} vs {sizes[1]})", "re-export with equal Q/K sizes")
    q, k, v = ctx.add("Split", [qkv, ctx.const(torch.tensor(sizes, dtype=torch.int64))], {"axis": -1}, num_outputs=3)
    mask = ""
    if _present(inputs, 3):
        info = ctx.info(inputs[3])
        if info is None or info.shape is None or len(info.shape) != 2:
            _refuse(node, "only a (batch, sequence) 0/1 mask_index is supported (1-D end positions and 3-D masks "
                    "are not)", "export the attention mask as (batch, sequence)")
        keep = ctx.add1("Cast", [inputs[3]], {"to": "bool"})
        mask = ctx.add1("Unsqueeze", [keep, ctx.const(torch.tensor([1, 2], dtype=torch.int64))])
    attrs = {"q_num_heads": heads, "kv_num_heads": heads, "is_causal": int(a.get("unidirectional", 0))}
    if a.get("scale", 0.0):
        attrs["scale"] = float(a["scale"])
    return [ctx.add("OnnxAttention", [q, k, v] + ([mask] if mask else []), attrs, num_outputs=1)[0]]


@importer("RotaryEmbedding", versions=(1,), domain=MS)
def import_ms_rotary(ctx, node, inputs):
    """→ ONNX RotaryEmbedding (inputs reordered; 2-D position_ids)."""
    a = node.attrs
    if a.get("is_packed_batching", 0) or float(a.get("scale", 1.0)) != 1.0:
        _refuse(node, "RotaryEmbedding with is_packed_batching or scale ≠ 1 is not supported", "re-export without them")
    info = ctx.info(inputs[1])
    if info is None or info.shape is None or len(info.shape) != 2:
        _refuse(node, "RotaryEmbedding needs (batch, sequence) position_ids (a 1-element offset is not supported)",
                "pass explicit position ids")
    attrs = {"interleaved": int(a.get("interleaved", 0)), "rotary_embedding_dim": int(a.get("rotary_embedding_dim", 0)),
             "num_heads": int(a.get("num_heads", 0))}
    return [ctx.add1("RotaryEmbedding", [inputs[0], inputs[2], inputs[3], inputs[1]], attrs)]


def _dq(ctx, x, scale, zp):
    return ctx.add1("DequantizeLinear", [x, scale] + ([zp] if zp else []), {"axis": 1, "block_size": 0})


def _q(ctx, y, scale, zp):
    return ctx.add1("QuantizeLinear", [y, scale] + ([zp] if zp else []),
                    {"axis": 1, "saturate": 1, "block_size": 0, "output_dtype": None})


def _qlinear_binary(ir_op):
    def fn(ctx, node, inputs):
        """Dequantize A and B, apply the float op, quantize to C (com.microsoft QLinearAdd / QLinearMul)."""
        ins = list(inputs) + [""] * (8 - len(inputs))
        y = ctx.add1(ir_op, [_dq(ctx, ins[0], ins[1], ins[2]), _dq(ctx, ins[3], ins[4], ins[5])])
        return [_q(ctx, y, ins[6], ins[7])]
    return fn


importer("QLinearAdd", versions=(1,), domain=MS)(_qlinear_binary("Add"))
importer("QLinearMul", versions=(1,), domain=MS)(_qlinear_binary("Mul"))


@importer("QLinearSigmoid", versions=(1,), domain=MS)
def import_qlinear_sigmoid(ctx, node, inputs):
    """Dequantize → Sigmoid → quantize."""
    ins = list(inputs) + [""] * (5 - len(inputs))
    return [_q(ctx, ctx.add1("Sigmoid", [_dq(ctx, ins[0], ins[1], ins[2])]), ins[3], ins[4])]


@importer("QLinearGlobalAveragePool", versions=(1,), domain=MS)
def import_qlinear_gap(ctx, node, inputs):
    """Dequantize → GlobalAveragePool (NCHW; channels_last refused) → quantize."""
    if node.attrs.get("channels_last", 0):
        _refuse(node, "QLinearGlobalAveragePool with channels_last=1 is not supported", "use the NCHW form")
    ins = list(inputs) + [""] * (5 - len(inputs))
    return [_q(ctx, ctx.add1("GlobalAveragePool", [_dq(ctx, ins[0], ins[1], ins[2])]), ins[3], ins[4])]


@importer("QLinearConcat", versions=(1,), domain=MS)
def import_qlinear_concat(ctx, node, inputs):
    """Each (x, scale, zp) triple dequantized → Concat(axis) → quantize to (Y_scale, Y_zp)."""
    ys, yz, rest = inputs[0], inputs[1], inputs[2:]
    parts = [_dq(ctx, rest[i], rest[i + 1], rest[i + 2]) for i in range(0, len(rest), 3)]
    return [_q(ctx, ctx.add1("Concat", parts, {"axis": int(node.attrs["axis"])}), ys, yz)]


@importer("MatMulNBits", versions=(1,), domain=MS)
def import_matmul_nbits(ctx, node, inputs):
    """A · dequantize(B)ᵀ (+ bias): 2/4/8-bit block-quantized weights (own IR op); g_idx refused."""
    a = node.attrs
    if _present(inputs, 4):
        _refuse(node, "MatMulNBits with g_idx (act-order) is not supported", "quantize without act-order")
    bits = int(a.get("bits", 4))
    if bits not in (2, 4, 8):
        _refuse(node, f"MatMulNBits with bits={bits}", "2, 4 and 8 bits are supported")
    # accuracy_level only picks onnxruntime's compute type for A (int8/fp16 on some CPUs); ignored: float math here
    attrs = {"K": int(a["K"]), "N": int(a["N"]), "bits": bits, "block_size": int(a["block_size"])}
    return [ctx.add1("MatMulNBits", list(inputs), attrs)]


@importer("EmbedLayerNormalization", versions=(1,), domain=MS)
def import_embed_layer_norm(ctx, node, inputs):
    """word + position (+ segment) embeddings → LayerNormalization; mask_index = row sums of the mask."""
    ins = list(inputs) + [""] * (9 - len(inputs))
    ids, seg, word, pos_table, seg_table, gamma, beta, mask, pos_ids = ins[:9]
    emb = ctx.add1("Gather", [word, ids], {"axis": 0})
    if not pos_ids:
        length = ctx.add1("Squeeze", [ctx.add1("Shape", [ids], {"start": 1, "end": 2}),
                                      ctx.const(torch.tensor([0], dtype=torch.int64))])
        pos_ids = ctx.add1("Range", [ctx.const(torch.tensor(0, dtype=torch.int64)), length,
                                     ctx.const(torch.tensor(1, dtype=torch.int64))], {"stash_type": 1})
    emb = ctx.add1("Add", [emb, ctx.add1("Gather", [pos_table, pos_ids], {"axis": 0})])
    if seg and seg_table:
        emb = ctx.add1("Add", [emb, ctx.add1("Gather", [seg_table, seg], {"axis": 0})])
    attrs = {"axis": -1, "epsilon": float(node.attrs.get("epsilon", 1e-12)), "stash_type": 1}
    y = ctx.add("LayerNormalization", [emb, gamma] + ([beta] if beta else []), attrs, num_outputs=1)[0]
    outs = list(node.outputs) + ["", ""]
    mask_index = ""
    if outs[1]:
        if not mask:
            _refuse(node, "mask_index output without a mask input", "pass the attention mask")
        summed = ctx.add1("ReduceSum", [mask, ctx.const(torch.tensor([1], dtype=torch.int64))], {"keepdims": 0})
        mask_index = ctx.add1("Cast", [summed], {"to": "int32"})
    return [y, mask_index, emb if outs[2] else ""][:max(1, len(node.outputs))]
