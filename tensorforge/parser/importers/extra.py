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
