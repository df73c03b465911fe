"""Importers for Attention (23, 24, 25), RotaryEmbedding, LinearAttention, CausalConvWithState.

Attention-23 has no nonpad_kv_seqlen input and no window attributes; 24 adds the input; 25 adds
left/right_window_size. All map to one IR op, OnnxAttention, whose absent attributes take the no-op defaults.
softmax_precision (an ONNX element type) becomes an IR dtype name.
"""

from ...ir import dtype_name
from ..registry import importer
from ..tensors import torch_dtype

_PASS = ("scale", "is_causal", "q_num_heads", "kv_num_heads", "softcap", "qk_matmul_output_mode",
         "left_window_size", "right_window_size")


@importer("Attention", versions=(23, 24, 25))
def import_attention(ctx, node, inputs):
    attrs = {k: node.attrs[k] for k in _PASS if k in node.attrs}
    if "softmax_precision" in node.attrs:
        attrs["softmax_precision"] = dtype_name(torch_dtype(node.attrs["softmax_precision"], f"{node.where()}: "))
    if inputs and inputs[0] and ctx.info(inputs[0]) is not None and ctx.info(inputs[0]).shape is not None \
            and len(ctx.info(inputs[0]).shape) == 3 and not {"q_num_heads", "kv_num_heads"} <= set(attrs):
        raise ValueError("3-D Q/K/V need the q_num_heads and kv_num_heads attributes")
    return ctx.add("OnnxAttention", inputs, attrs, num_outputs=4)[:len(node.outputs)]


def _with_attrs(ir_op, names, n_out=1):
    def fn(ctx, node, inputs):
        attrs = {k: node.attrs[k] for k in names if k in node.attrs}
        return ctx.add(ir_op, inputs, attrs, num_outputs=n_out)[:len(node.outputs)]
    return fn


importer("RotaryEmbedding", versions=(23,))(
    _with_attrs("RotaryEmbedding", ("interleaved", "rotary_embedding_dim", "num_heads")))
importer("LinearAttention", versions=(27,))(
    _with_attrs("LinearAttention", ("q_num_heads", "kv_num_heads", "scale", "update_rule", "chunk_size"), 2))
importer("CausalConvWithState", versions=(27,))(_with_attrs("CausalConvWithState", ("activation",), 2))


@importer("FlexAttention", versions=(1,), domain="ai.onnx.preview")
def import_flex_attention(ctx, node, inputs):
    """score_mod/prob_mod subgraphs become sub-networks; their outer-scope tensors trail Q, K, V."""
    from .control import free_names, subnetwork
    attrs = {k: node.attrs[k] for k in ("scale",) if k in node.attrs}
    if "softmax_precision" in node.attrs:
        attrs["softmax_precision"] = dtype_name(torch_dtype(node.attrs["softmax_precision"], f"{node.where()}: "))
    extra = []
    for key in ("score_mod", "prob_mod"):
        if key in node.attrs:
            captured = free_names(node.attrs[key])
            attrs[key] = subnetwork(ctx, node.attrs[key], captured, f"{node.name or 'FlexAttention'}/{key}")
            extra += [ctx.resolve(n) for n in captured]
            if key == "score_mod":
                attrs["num_score_captured"] = len(captured)
    return [ctx.add1("FlexAttention", inputs + extra, attrs)]
