"""Importers for ai.onnx.ml (the classic-ML ops skl2onnx and onnxmltools write) → ir/ops/ml*.py.

Tree ensembles of every encoding (TreeEnsembleRegressor/Classifier 1 and 3, TreeEnsemble 5) become one canonical
IR op (ml_trees.py docstring). A classifier with string class labels computes class indices and ends in a
ClassLabelStrings layer; ZipMap becomes a ZipMap layer (ml_zipmap.py: Python values, engine outputs only).
String categories (LabelEncoder, OneHotEncoder) are refused with what to do instead.
"""

from ...ir import dtype_name
from ...util.errors import UnsupportedOpError
from ..registry import importer

ML = "ai.onnx.ml"
_MODES = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3, "BRANCH_EQ": 4, "BRANCH_NEQ": 5,
          "BRANCH_MEMBER": 6, "LEAF": 7}
_AGG5 = {0: "AVERAGE", 1: "SUM", 2: "MIN", 3: "MAX"}
_POST5 = {0: "NONE", 1: "SOFTMAX", 2: "LOGISTIC", 3: "SOFTMAX_ZERO", 4: "PROBIT"}


ZIPMAP_HINT = ("convert with zipmap=False (skl2onnx options={'zipmap': False}, onnxmltools zipmap=False): the "
               "probabilities are then one tensor with a column per class, in classlabels order")


def _refuse(node, what, hint):
    raise UnsupportedOpError(f"{node.where()}: {what}", hint)


def _labels(node, key="classlabels_int64s"):
    """(integer labels the op computes, string labels or None): string labels make the op compute class indices."""
    strings = node.attrs.get("classlabels_strings")
    if strings:
        return list(range(len(strings))), [str(s) for s in strings]
    return list(node.attrs.get(key) or []), None


def _classifier(ctx, op, inputs, attrs, strings):
    """The classifier layer's (labels, scores); with string labels the labels pass through ClassLabelStrings."""
    label, scores = ctx.add(op, inputs, attrs, num_outputs=2)
    if strings is not None:
        label = ctx.add1("ClassLabelStrings", [label], {"labels": strings})
    return [label, scores]


def _floats(attrs, name):
    """A float list attribute or its *_as_tensor (double) twin, as Python floats (None when absent)."""
    if attrs.get(f"{name}_as_tensor") is not None:
        return attrs[f"{name}_as_tensor"].reshape(-1).double().tolist()
    v = attrs.get(name)
    return list(v) if v is not None else None


@importer("Binarizer", versions=(1,), domain=ML)
def import_binarizer(ctx, node, inputs):
    """1 where x > threshold."""
    return [ctx.add1("Binarizer", inputs, {"threshold": node.attrs.get("threshold", 0.0)})]


@importer("ArrayFeatureExtractor", versions=(1,), domain=ML)
def import_array_feature_extractor(ctx, node, inputs):
    """x[..., indices]."""
    return [ctx.add1("ArrayFeatureExtractor", inputs)]


def _pick(node, kind):
    """keys/values of one LabelEncoder side: from the *_tensor, *_int64s or *_floats attribute."""
    attrs = node.attrs
    if f"{kind}_tensor" in attrs:
        t = attrs[f"{kind}_tensor"]
        return t.reshape(-1).tolist(), dtype_name(t.dtype)
    for suffix, dt in (("int64s", "int64"), ("floats", "float32")):
        if attrs.get(f"{kind}_{suffix}"):
            return list(attrs[f"{kind}_{suffix}"]), dt
    _refuse(node, f"LabelEncoder with string {kind} (engines hold numeric tensors only)",
            "encode strings to integers before the model input")


@importer("LabelEncoder", versions=(2, 4), domain=ML)
def import_label_encoder(ctx, node, inputs):
    """numeric keys/values (strings refused)."""
    keys, _ = _pick(node, "keys")
    values, out_dtype = _pick(node, "values")
    if "default_tensor" in node.attrs:
        default = node.attrs["default_tensor"].reshape(-1).tolist()[0]
    else:
        default = node.attrs.get("default_int64", -1) if out_dtype.startswith("int") else node.attrs.get(
            "default_float", -0.0)
    return [ctx.add1("LabelEncoder", inputs, {"keys": keys, "values": values, "default": default,
                                              "out_dtype": out_dtype})]


@importer("LinearClassifier", versions=(1,), domain=ML)
def import_linear_classifier(ctx, node, inputs):
    """x·Wᵀ + b, post_transform, arg-max label (integer labels)."""
    a = node.attrs
    labels, strings = _labels(node, "classlabels_ints")
    attrs = {"coefficients": list(a["coefficients"]), "intercepts": list(a.get("intercepts") or []),
             "classlabels_ints": labels, "multi_class": a.get("multi_class", 0),
             "post_transform": a.get("post_transform", "NONE")}
    return _classifier(ctx, "LinearClassifier", inputs, attrs, strings)


@importer("LinearRegressor", versions=(1,), domain=ML)
def import_linear_regressor(ctx, node, inputs):
    """x·Wᵀ + b."""
    a = node.attrs
    return [ctx.add1("LinearRegressor", inputs, {"coefficients": list(a["coefficients"]),
                                                 "intercepts": list(a.get("intercepts") or []),
                                                 "targets": a.get("targets", 1),
                                                 "post_transform": a.get("post_transform", "NONE")})]


@importer("Scaler", versions=(1,), domain=ML)
def import_scaler(ctx, node, inputs):
    """(x − offset) · scale."""
    return [ctx.add1("Scaler", inputs, {"offset": list(node.attrs.get("offset") or []),
                                        "scale": list(node.attrs.get("scale") or [])})]


@importer("Normalizer", versions=(1,), domain=ML)
def import_normalizer(ctx, node, inputs):
    """MAX / L1 / L2 per row."""
    return [ctx.add1("Normalizer", inputs, {"norm": node.attrs.get("norm", "MAX")})]


@importer("Imputer", versions=(1,), domain=ML)
def import_imputer(ctx, node, inputs):
    """replaced value (NaN) → imputed value per column."""
    a = node.attrs
    if a.get("imputed_value_floats"):
        r = a.get("replaced_value_float", float("nan"))
        attrs = {"imputed_values": list(a["imputed_value_floats"]), "replaced_value": None if r != r else r}
    elif a.get("imputed_value_int64s"):
        attrs = {"imputed_values": list(a["imputed_value_int64s"]), "replaced_value": a.get("replaced_value_int64", 0)}
    else:
        raise UnsupportedOpError(f"{node.where()}: Imputer without imputed values", "re-export the model")
    return [ctx.add1("Imputer", inputs, attrs)]


@importer("OneHotEncoder", versions=(1,), domain=ML)
def import_one_hot_encoder(ctx, node, inputs):
    """integer categories (strings refused)."""
    if not node.attrs.get("cats_int64s"):
        _refuse(node, "OneHotEncoder over string categories (engines hold numeric tensors only)",
                "encode the strings as integers (OrdinalEncoder) before the model input")
    return [ctx.add1("OneHotEncoder", inputs, {"cats": list(node.attrs["cats_int64s"])})]


@importer("FeatureVectorizer", versions=(1,), domain=ML)
def import_feature_vectorizer(ctx, node, inputs):
    """inputs cut/padded to inputdimensions, concatenated."""
    return [ctx.add1("FeatureVectorizer", inputs, {"inputdimensions": list(node.attrs["inputdimensions"])})]


_SVM = ("coefficients", "kernel_params", "rho", "support_vectors")


@importer("SVMClassifier", versions=(1,), domain=ML)
def import_svm_classifier(ctx, node, inputs):
    """one-vs-one SVC (no Platt probabilities)."""
    a = node.attrs
    if a.get("prob_a"):
        _refuse(node, "SVMClassifier with Platt probabilities (prob_a/prob_b) is not implemented",
                "export the SVC with probability=False (labels and decision scores are supported)")
    attrs = {k: list(a.get(k) or []) for k in _SVM}
    labels, strings = _labels(node, "classlabels_ints")
    attrs.update(classlabels_ints=labels, kernel_type=a.get("kernel_type", "LINEAR"),
                 post_transform=a.get("post_transform", "NONE"), vectors_per_class=list(a.get("vectors_per_class") or []))
    return _classifier(ctx, "SVMClassifier", inputs, attrs, strings)


@importer("SVMRegressor", versions=(1,), domain=ML)
def import_svm_regressor(ctx, node, inputs):
    """SVR / one-class."""
    a = node.attrs
    attrs = {k: list(a.get(k) or []) for k in _SVM}
    attrs.update(kernel_type=a.get("kernel_type", "LINEAR"), n_supports=a.get("n_supports", 0),
                 one_class=a.get("one_class", 0), post_transform=a.get("post_transform", "NONE"))
    return [ctx.add1("SVMRegressor", inputs, attrs)]


@importer("ZipMap", versions=(1,), domain=ML)
def import_zipmap(ctx, node, inputs):
    """→ a list of {class: probability} dicts, one per row (a graph output only: ir/ops/ml_zipmap.py)."""
    keys = node.attrs.get("classlabels_strings") or node.attrs.get("classlabels_int64s")
    if not keys:
        _refuse(node, "ZipMap without classlabels_strings or classlabels_int64s", ZIPMAP_HINT)
    keys = [str(k) for k in keys] if node.attrs.get("classlabels_strings") else [int(k) for k in keys]
    return [ctx.add1("ZipMap", inputs, {"keys": keys})]


def _canonical_v3(node, prefix: str) -> dict:
    """TreeEnsembleRegressor/Classifier 1–3 (per-node tuples keyed by (tree id, node id)) → canonical lists."""
    a = node.attrs
    trees, ids = list(a["nodes_treeids"]), list(a["nodes_nodeids"])
    where = {(t, n): i for i, (t, n) in enumerate(zip(trees, ids))}
    modes = [_MODES[m] for m in a["nodes_modes"]]
    if 6 in modes:
        _refuse(node, "BRANCH_MEMBER is a TreeEnsemble (ml opset 5) mode", "re-export with ai.onnx.ml opset 5")
    values = _floats(a, "nodes_values") or [0.0] * len(modes)
    true, false = [], []
    for i, (t, m) in enumerate(zip(trees, modes)):
        if m == 7:
            true.append(i), false.append(i)
            continue
        try:
            true.append(where[t, a["nodes_truenodeids"][i]]), false.append(where[t, a["nodes_falsenodeids"][i]])
        except KeyError as e:
            raise UnsupportedOpError(f"{node.where()}: node {ids[i]} of tree {t} points at missing node {e}",
                                     "the ensemble is malformed; re-export it") from None
    roots, seen = [], set()
    for i, t in enumerate(trees):
        if t not in seen:
            seen.add(t)
            roots.append(where.get((t, 0), i))
    missing = list(a.get("nodes_missing_value_tracks_true") or [0] * len(modes))
    leaf_nodes = [where[t, n] for t, n in zip(a[f"{prefix}_treeids"], a[f"{prefix}_nodeids"])]
    return {"nodes_featureids": list(a["nodes_featureids"]), "nodes_values": values, "nodes_modes": modes,
            "nodes_truenodeids": true, "nodes_falsenodeids": false, "nodes_missing_value_tracks_true": missing,
            "tree_roots": roots, "leaf_nodeids": leaf_nodes, "leaf_targetids": list(a[f"{prefix}_ids"]),
            "leaf_weights": _floats(a, f"{prefix}_weights"),
            "aggregate_function": a.get("aggregate_function", "SUM"),
            "post_transform": a.get("post_transform", "NONE"), "base_values": _floats(a, "base_values") or [],
            "out_dtype": "float32",
            "sum_dtype": "float64" if a.get(f"{prefix}_weights_as_tensor") is not None else "float32"}


@importer("TreeEnsembleRegressor", versions=(1, 3), domain=ML)
def import_tree_ensemble_regressor(ctx, node, inputs):
    """→ canonical tree ensemble (traverse / GEMM tactics)."""
    attrs = _canonical_v3(node, "target")
    attrs["n_targets"] = node.attrs.get("n_targets", 1)
    return [ctx.add1("TreeEnsembleRegressor", inputs, attrs)]


@importer("TreeEnsembleClassifier", versions=(1, 3), domain=ML)
def import_tree_ensemble_classifier(ctx, node, inputs):
    """→ canonical tree ensemble; labels and probabilities as onnxruntime."""
    attrs = _canonical_v3(node, "class")
    labels, strings = _labels(node)
    attrs.update(classlabels=labels, n_targets=len(labels))
    return _classifier(ctx, "TreeEnsembleClassifier", inputs, attrs, strings)


@importer("TreeEnsemble", versions=(5,), domain=ML)
def import_tree_ensemble(ctx, node, inputs):
    """→ canonical tree ensemble (interior nodes keep their indices, leaf i becomes node n_nodes + i)."""
    a = node.attrs
    n = len(a["nodes_modes"].reshape(-1) if hasattr(a["nodes_modes"], "reshape") else a["nodes_modes"])

    def flat(key, default=None):
        v = a.get(key, default)
        return v.reshape(-1).tolist() if hasattr(v, "reshape") else list(v)

    modes, n_leaves = flat("nodes_modes"), len(a["leaf_targetids"])
    true = [t + n if leaf else t for t, leaf in zip(a["nodes_truenodeids"], a["nodes_trueleafs"])]
    false = [f + n if leaf else f for f, leaf in zip(a["nodes_falsenodeids"], a["nodes_falseleafs"])]
    members, pending = [], flat("membership_values", []) if a.get("membership_values") is not None else []
    for m in modes:                                  # one NaN-delimited set per BRANCH_MEMBER node, in node order
        if m == 6:
            cut = next((j for j, v in enumerate(pending) if v != v), len(pending))
            members.append(pending[:cut])
            pending = pending[cut + 1:]
    leaves = list(range(n, n + n_leaves))
    attrs = {"nodes_featureids": list(a["nodes_featureids"]) + [0] * n_leaves,
             "nodes_values": [0.0 if v != v else v for v in flat("nodes_splits")] + [0.0] * n_leaves, "nodes_modes": modes + [7] * n_leaves,
             "nodes_truenodeids": true + leaves, "nodes_falsenodeids": false + leaves,
             "nodes_missing_value_tracks_true": list(a.get("nodes_missing_value_tracks_true") or [0] * n)
             + [0] * n_leaves,
             "tree_roots": list(a["tree_roots"]), "leaf_nodeids": leaves, "leaf_targetids": list(a["leaf_targetids"]),
             "leaf_weights": flat("leaf_weights"), "membership_values": members, "n_targets": a["n_targets"],
             "aggregate_function": _AGG5[a.get("aggregate_function", 1)],
             "post_transform": _POST5[a.get("post_transform", 0)],
             "sum_dtype": dtype_name(a["leaf_weights"].dtype) if hasattr(a["leaf_weights"], "dtype") else "float64"}
    return [ctx.add1("TreeEnsembleRegressor", inputs, attrs)]


VALUE_OPS = ("ClassLabelStrings", "ZipMap")


def check_value_outputs(net) -> None:
    """String labels and ZipMap's maps are Python values (ir/ops/ml_zipmap.py): they may only reach the engine's
    outputs (through Identity layers). Any other reader is refused here, at parse time, naming the ONNX node."""
    readers: dict[str, list] = {}
    for layer in net.layers:
        for i in layer.inputs:
            readers.setdefault(i, []).append(layer)
    for layer in net.layers:
        if layer.op not in VALUE_OPS:
            continue
        todo = list(layer.outputs)
        while todo:
            name = todo.pop()
            users = readers.get(name, [])
            bad = [u for u in users if u.op != "Identity"]
            if bad:
                what = "string class labels" if layer.op == "ClassLabelStrings" else "ZipMap's list of dicts"
                node = layer.origin[0] if layer.origin else layer.name
                hint = ("train the classifier on integer labels (sklearn LabelEncoder on y): they stay a tensor"
                        if layer.op == "ClassLabelStrings" else ZIPMAP_HINT)
                raise UnsupportedOpError(f"node {node!r}: {what} can only be a graph output, here "
                                         f"{bad[0].op} ({', '.join(bad[0].origin)}) reads them", hint)
            todo += [o for u in users for o in u.outputs]
