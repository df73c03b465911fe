"""Importers for onnxruntime's attention contrib ops (com.microsoft, version 1): MultiHeadAttention and
GroupQueryAttention, each its own IR op (ir/ops/contrib_attention.py, which states the math); the ranks of Q/K/V
(unpacked, packed or BNSH) are dispatched there, at run time, since optimizer-written files carry no shapes.

Refused here with a reason (onnxruntime features for its CUDA decoding loop or not run by its CPU kernel):
    MultiHeadAttention: past_sequence_length / cache_indirection; bias with packed QKV or BNSH key/value; only
        one of past_key / past_value; BNSH key/value with past or present; the qk output of a unidirectional one
        (causal entries are −∞ here); at build or run time, a unidirectional one with a key length ≠ query length.
    GroupQueryAttention: a quantized KV cache (k_scale / v_scale, kv_cache_bit_width, k/v_quant_type),
        q/k RMS norm weights, query_seqlens, sliding_window_cache, the qk output, rotary without cos/sin caches.
"""

from ...util.errors import UnsupportedOpError
from ..registry import importer

MS = "com.microsoft"


def _present(inputs, i):
    return len(inputs) > i and bool(inputs[i])


def _refuse(node, what, hint):
    raise UnsupportedOpError(f"{node.where()}: {what}", hint)


def _rank(ctx, name):
    info = ctx.info(name) if name else None
    return None if info is None or info.shape is None else len(info.shape)


def _wanted(node) -> int:
    """1 + the index of the last output the node names (the IR layer declares no more)."""
    named = [i for i, o in enumerate(node.outputs) if o]
    return (named[-1] + 1) if named else 1


@importer("MultiHeadAttention", versions=(1,), domain=MS)
def import_multi_head_attention(ctx, node, inputs):
    """Self/cross attention: unpacked, packed QKV/KV or BNSH K/V, bias, padding mask, attention_bias, past/present."""
    a = node.attrs
    if _present(inputs, 8) or _present(inputs, 9):
        _refuse(node, "MultiHeadAttention with past_sequence_length or cache_indirection is not supported",
                "those are onnxruntime's CUDA decoding buffers (shared KV cache, beam search); export without them")
    if _present(inputs, 3) and (_rank(ctx, inputs[0]) == 5 or _rank(ctx, inputs[1]) in (4, 5)):
        _refuse(node, "MultiHeadAttention bias with packed QKV/KV or BNSH key/value is not supported",
                "add the bias before packing (onnxruntime's CPU kernel runs neither)")
    if _present(inputs, 6) != _present(inputs, 7):
        _refuse(node, "MultiHeadAttention with only one of past_key / past_value", "give both or neither")
    if _present(inputs, 4) and _rank(ctx, inputs[4]) == 1:
        mask_dims, q_dims = ctx.info(inputs[4]).shape, (ctx.info(inputs[0]).shape if _rank(ctx, inputs[0]) else None)
        if q_dims and isinstance(mask_dims[0], int) and isinstance(q_dims[0], int) and mask_dims[0] != q_dims[0]:
            _refuse(node, f"key_padding_mask of length {mask_dims[0]} for batch {q_dims[0]} (the (3B+2) form)",
                    "that form is for onnxruntime's CUDA kernels; give (B) lengths or a (B, T) 0/1 mask")
    outs = list(node.outputs) + [""] * 4
    if _rank(ctx, inputs[1] if len(inputs) > 1 else "") == 4 and (_present(inputs, 6) or outs[1] or outs[2]):
        _refuse(node, "MultiHeadAttention with (B, N, L, H) key/value and past inputs or present outputs",
                "key/value in that form are the cache already; give past_key/past_value with 3-D key/value instead")
    unidirectional = int(a.get("unidirectional", 0))
    if outs[3] and unidirectional:
        _refuse(node, "the qk output of a unidirectional MultiHeadAttention is not supported",
                "its causal entries are −∞ here and mask_filter_value in onnxruntime; drop the qk output")
    attrs = {"num_heads": int(a["num_heads"]), "mask_filter_value": float(a.get("mask_filter_value", -10000.0)),
             "scale": float(a.get("scale", 0.0)), "unidirectional": unidirectional}
    ins = list(inputs[:8])
    while ins and not ins[-1]:
        ins.pop()
    produced = ctx.add("MultiHeadAttention", ins, attrs, num_outputs=_wanted(node))   # qk only when asked for
    return [p if (i == 0 or outs[i]) else "" for i, p in enumerate(produced)]


_GQA_PASS = ("num_heads", "kv_num_heads", "scale", "softcap", "local_window_size", "do_rotary", "rotary_interleaved",
             "causal", "smooth_softmax")


@importer("GroupQueryAttention", versions=(1,), domain=MS)
def import_group_query_attention(ctx, node, inputs):
    """KV-cache attention with fewer KV heads: past/present, seqlens_k, rotary, local window, softcap, head_sink."""
    a = node.attrs
    quant_types = {v.decode() if isinstance(v, bytes) else str(v)
                   for v in (a.get("k_quant_type", "NONE"), a.get("v_quant_type", "NONE"))}
    if any(_present(inputs, i) for i in (12, 13)) or a.get("kv_cache_bit_width", 0) or quant_types != {"NONE"}:
        _refuse(node, "GroupQueryAttention with a quantized KV cache is not supported",
                "keep the KV cache in float (k_scale/v_scale, kv_cache_bit_width, k/v_quant_type unset)")
    if _present(inputs, 14) or _present(inputs, 15):
        _refuse(node, "GroupQueryAttention with q/k RMS norm weights is not supported",
                "export the SimplifiedLayerNormalization unfused")
    if _present(inputs, 16):
        _refuse(node, "GroupQueryAttention with query_seqlens (right-padded prompt chunks) is not supported",
                "run unpadded chunks")
    if a.get("sliding_window_cache", 0):
        _refuse(node, "GroupQueryAttention with sliding_window_cache=1 is not supported",
                "use a full-length cache with local_window_size")
    if a.get("qk_output", 0) or (len(node.outputs) > 3 and node.outputs[3]):
        _refuse(node, "the output_qk of GroupQueryAttention is not supported", "drop the output_qk output")
    if a.get("do_rotary", 0) and not (_present(inputs, 7) and _present(inputs, 8)):
        _refuse(node, "GroupQueryAttention with do_rotary needs cos_cache and sin_cache", "give both caches")
    if not (_present(inputs, 5) and _present(inputs, 6)):
        _refuse(node, "GroupQueryAttention needs seqlens_k and total_sequence_length", "give both inputs")
    if _present(inputs, 3) != _present(inputs, 4):
        _refuse(node, "GroupQueryAttention with only one of past_key / past_value", "give both or neither")
    attrs = {k: a[k] for k in _GQA_PASS if k in a}
    ins = list(inputs[:12])
    while ins and not ins[-1]:
        ins.pop()
    produced = ctx.add("GroupQueryAttention", ins, attrs, num_outputs=min(3, _wanted(node)))
    outs = list(node.outputs) + [""] * 3
    return [p if (i == 0 or outs[i]) else "" for i, p in enumerate(produced)]
