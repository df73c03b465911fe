"""Importers for the ai.onnx.ml ops of ir/ops/ml.py: Binarizer, ArrayFeatureExtractor, LabelEncoder
(2 and 4, numeric keys/values only — string tensors are out of scope), TreeEnsemble (5)."""

from ...ir import dtype_name
from ..registry import importer

ML = "ai.onnx.ml"


@importer("Binarizer", versions=(1,), domain=ML)
def import_binarizer(ctx, node, inputs):
    return [ctx.add1("Binarizer", inputs, {"threshold": node.attrs.get("threshold", 0.0)})]


@importer("ArrayFeatureExtractor", versions=(1,), domain=ML)
def import_array_feature_extractor(ctx, node, inputs):
    return [ctx.add1("ArrayFeatureExtractor", inputs)]


def _pick(attrs, kind):
    """keys/values of one LabelEncoder side: from the *_tensor, *_int64s or *_floats attribute."""
    if f"{kind}_tensor" in attrs:
        t = attrs[f"{kind}_tensor"]
        return t.reshape(-1).tolist(), dtype_name(t.dtype)
    for suffix, dt in (("int64s", "int64"), ("floats", "float32")):
        if f"{kind}_{suffix}" in attrs:
            return list(attrs[f"{kind}_{suffix}"]), dt
    raise ValueError(f"LabelEncoder with string {kind} is not supported (no string tensors)")


@importer("LabelEncoder", versions=(2, 4), domain=ML)
def import_label_encoder(ctx, node, inputs):
    keys, _ = _pick(node.attrs, "keys")
    values, out_dtype = _pick(node.attrs, "values")
    if "default_tensor" in node.attrs:
        default = node.attrs["default_tensor"].reshape(-1).tolist()[0]
    else:
        default = node.attrs.get("default_int64", -1) if out_dtype.startswith("int") else node.attrs.get(
            "default_float", -0.0)
    return [ctx.add1("LabelEncoder", inputs, {"keys": keys, "values": values, "default": default,
                                              "out_dtype": out_dtype})]


_TREE = ("nodes_splits", "nodes_featureids", "nodes_modes", "nodes_truenodeids", "nodes_falsenodeids",
         "nodes_trueleafs", "nodes_falseleafs", "leaf_targetids", "leaf_weights", "tree_roots", "n_targets",
         "aggregate_function", "post_transform", "nodes_missing_value_tracks_true", "membership_values")


@importer("TreeEnsemble", versions=(5,), domain=ML)
def import_tree_ensemble(ctx, node, inputs):
    return [ctx.add1("TreeEnsemble", inputs, {k: node.attrs[k] for k in _TREE if k in node.attrs})]
