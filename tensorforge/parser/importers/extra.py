"""Importers for the ops in ir/ops/{extra,loss,spatial}.py (1:1 onto IR ops of the same name).

Versions listed are the ONNX since_versions whose semantics the IR op implements; later versions that
only widen the type list (NegativeLogLikelihoodLoss-22, Det-22) map onto the same op.
"""

from ..registry import importer


def _with_attrs(ir_op, names=()):
    def fn(ctx, node, inputs):
        attrs = {k: node.attrs[k] for k in names if k in node.attrs}
        return ctx.add(ir_op, inputs, attrs, num_outputs=max(1, len(node.outputs)))
    return fn


_SIMPLE = {
    "RMSNormalization": ((23,), ("axis", "epsilon", "stash_type")),
    "Swish": ((24,), ("alpha",)),
    "SwiGLU": ((28,), ("alpha",)),
    "Shrink": ((9,), ("lambd", "bias")),
    "CumProd": ((26,), ("exclusive", "reverse")),
    "Det": ((11, 22), ()),
    "NegativeLogLikelihoodLoss": ((12, 13, 22), ("reduction", "ignore_index")),
    "SoftmaxCrossEntropyLoss": ((12, 13), ("reduction", "ignore_index")),
    "Unique": ((11, 28), ("axis", "sorted")),
    "CenterCropPad": ((18,), ("axes",)),
    "Col2Im": ((18,), ("dilations", "pads", "strides")),
    "AffineGrid": ((20,), ("align_corners",)),
    "DeformConv": ((19, 22), ("dilations", "group", "kernel_shape", "offset_group", "pads", "strides")),
    "MaxUnpool": ((9, 11, 22), ("kernel_shape", "pads", "strides")),
}

for _op, (_versions, _attrs) in _SIMPLE.items():
    importer(_op, versions=_versions)(_with_attrs(_op, _attrs))


@importer("TfIdfVectorizer", versions=(9,))
def import_tfidf_vectorizer(ctx, node, inputs):
    """Integer pools only: pool_strings needs string tensors, which tensorforge does not have."""
    if "pool_int64s" not in node.attrs:
        raise ValueError("TfIdfVectorizer with pool_strings is not supported (no string tensors)")
    names = ("max_gram_length", "max_skip_count", "min_gram_length", "mode", "ngram_counts", "ngram_indexes",
             "pool_int64s", "weights")
    return [ctx.add1("TfIdfVectorizer", inputs, {k: node.attrs[k] for k in names if k in node.attrs})]


def _optimizer(ir_op, names):
    def fn(ctx, node, inputs):
        attrs = {k: node.attrs[k] for k in names if k in node.attrs}
        return ctx.add(ir_op, inputs, attrs, num_outputs=len(node.outputs))
    return fn


_TRAINING = "ai.onnx.preview.training"
importer("Adagrad", versions=(1,), domain=_TRAINING)(_optimizer("Adagrad", ("decay_factor", "epsilon", "norm_coefficient")))
importer("Adam", versions=(1,), domain=_TRAINING)(
    _optimizer("Adam", ("alpha", "beta", "epsilon", "norm_coefficient", "norm_coefficient_post")))
importer("Momentum", versions=(1,), domain=_TRAINING)(_optimizer("Momentum", ("alpha", "beta", "mode", "norm_coefficient")))
