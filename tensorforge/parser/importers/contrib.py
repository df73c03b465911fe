"""Importers for onnxruntime contrib ops (domain com.microsoft, version 1), the ones its transformer optimizer and
quantizer write. onnx ships no schema for this domain, so attribute defaults are onnxruntime's
(docs/ContribOperators.md), written here. Same math as existing IR ops → those ops (the passes then fuse them as
for any exporter); new math → ir/ops/contrib.py.

    FastGelu(x, bias?)              Add → Gelu(tanh)            BiasGelu(a, b)   Add → Gelu(erf)
    QuickGelu(x; alpha=1.702)       x · Sigmoid(alpha · x)      Gelu(x)          Gelu(erf)
    SkipLayerNormalization(x, skip, γ, β?, bias?; epsilon)  s = x + skip (+ bias) → LayerNormalization(s, γ, β);
                                    outputs: y and (4th) s; mean / inv_std_var outputs are refused
    FusedMatMul(A, B; alpha, transA, transB)  Transpose of the last two axes → MatMul → · alpha
    MatMulIntegerToFloat            its own IR op (ir/ops/contrib.py)
    DynamicQuantizeMatMul(A, B, b_scale, b_zp?, bias?)  DynamicQuantizeLinear(A) → MatMulIntegerToFloat
"""

import torch

from ...util.errors import UnsupportedOpError
from ..registry import importer

MS = "com.microsoft"

# contrib ops onnxruntime's tools emit that have no importer yet, and why (docs/operators.md lists them)
NOT_SUPPORTED = {
    "Attention": "packed-QKV attention with mask_index variants, past/present state and relative position bias; "
                 "not done yet (the optimizer did not emit it for the test BERT/GPT-2 exports, which keep MatMul/Softmax)",
    "MultiHeadAttention": "the same family as Attention (separate or packed Q/K/V, cache, bias); not done yet",
    "GroupQueryAttention": "KV-cache decoding op (past/present buffers, seqlens_k, rotary inside); not done yet",
    "RotaryEmbedding": "interleaved/half rotation with position_ids and a cos/sin cache; not done yet",
    "EmbedLayerNormalization": "word + position + segment embeddings + LayerNorm with a mask-index output; not done "
                               "yet (not emitted for the test exports)",
    "DynamicQuantizeLSTM": "int8 LSTM whose input and hidden state onnxruntime re-quantizes every step; matching its "
                           "rounding needs its kernel's exact order; not done yet",
    "MatMulNBits": "4-bit block-quantized weights (blob layout, g_idx, zero-point packing); not done yet",
    "QLinearConv": "com.microsoft QLinear* ops (QLinearConv NHWC, QLinearAdd/Mul/Sigmoid/GlobalAveragePool/Concat) "
                   "and QGemm: not done yet — quantize_static's QDQ format (standard ops) is supported instead",
    "QGemm": "see QLinearConv",
    "FusedConv": "Conv + activation fused by onnxruntime at session time (rarely in files); not done yet",
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
