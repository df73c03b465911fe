"""ai.onnx.ml ops that are cheap on tensors: Binarizer, ArrayFeatureExtractor, LabelEncoder (numeric keys
and values only), TreeEnsemble.

TreeEnsemble walks each sample down every tree (node tests ≤ < ≥ > = ≠ ∈, NaN following
missing_value_tracks_true), collects the leaves' (target, weight) pairs and aggregates them per target
(SUM, AVERAGE = sum / trees, MIN, MAX), then applies post_transform. The walk runs on the host: a tree
ensemble is branchy scalar code, O(samples · trees · depth).
"""

import math

import torch

from ..dtypes import dtype_from_name
from ..opspec import REQUIRED, op


@op("Binarizer", attrs={"threshold": 0.0})
def binarizer(x, *, threshold=0.0):
    """1 where x > threshold, else 0, in x's dtype."""
    return (x > threshold).to(x.dtype)


@op("ArrayFeatureExtractor", value_inputs=(1,))
def array_feature_extractor(x, indices):
    """x[..., indices] (indices flattened); a 1-D x gives one row, as onnxruntime does."""
    index = indices.reshape(-1).to(x.device).long()
    out = x.index_select(x.dim() - 1, index)
    return out.reshape(1, -1) if x.dim() == 1 else out


@op("LabelEncoder", attrs={"keys": REQUIRED, "values": REQUIRED, "default": REQUIRED, "out_dtype": REQUIRED})
def label_encoder(x, *, keys, values, default, out_dtype):
    """y = values[i] where x == keys[i], else default (numeric keys and values; NaN keys match NaN)."""
    out = torch.full(x.shape, default, dtype=dtype_from_name(out_dtype), device=x.device)
    for k, v in zip(keys, values):
        hit = torch.isnan(x) if isinstance(k, float) and math.isnan(k) else x == k
        out = torch.where(hit, torch.tensor(v, dtype=out.dtype, device=x.device), out)
    return out


_TREE_ATTRS = {k: REQUIRED for k in ("nodes_splits", "nodes_featureids", "nodes_modes", "nodes_truenodeids",
                                     "nodes_falsenodeids", "nodes_trueleafs", "nodes_falseleafs", "leaf_targetids",
                                     "leaf_weights", "tree_roots", "n_targets")}


def _transform(scores: torch.Tensor, kind: int) -> torch.Tensor:
    if kind == 0:
        return scores
    if kind == 1:
        return torch.softmax(scores, dim=1)
    if kind == 2:
        return torch.sigmoid(scores)
    if kind == 3:       # softmax over the non-zero scores; zeros stay zero
        nz = scores != 0
        e = torch.where(nz, torch.exp(scores - scores.amax(dim=1, keepdim=True)), torch.zeros_like(scores))
        return e / e.sum(dim=1, keepdim=True).clamp_min(1e-300)
    if kind == 4:
        return math.sqrt(2) * torch.erfinv(2 * scores - 1)
    raise ValueError(f"unknown TreeEnsemble post_transform {kind}")


@op("TreeEnsemble", attrs={**_TREE_ATTRS, "aggregate_function": 1, "post_transform": 0,
                           "nodes_missing_value_tracks_true": None, "membership_values": None},
    infer=lambda x, *, n_targets, **_: torch.empty(x.shape[0], n_targets, dtype=x.dtype, device="meta"))
def tree_ensemble(x, *, nodes_splits, nodes_featureids, nodes_modes, nodes_truenodeids, nodes_falsenodeids,
                  nodes_trueleafs, nodes_falseleafs, leaf_targetids, leaf_weights, tree_roots, n_targets,
                  aggregate_function=1, post_transform=0, nodes_missing_value_tracks_true=None,
                  membership_values=None):
    splits, modes = torch.as_tensor(nodes_splits).tolist(), torch.as_tensor(nodes_modes).tolist()
    weights = torch.as_tensor(leaf_weights).tolist()
    missing = list(nodes_missing_value_tracks_true or [0] * len(modes))
    members, pending = {}, list(torch.as_tensor(membership_values).tolist()) if membership_values is not None else []
    for i, m in enumerate(modes):            # one NaN-delimited set per BRANCH_MEMBER node, in node order
        if m == 6:
            cut = next((j for j, v in enumerate(pending) if math.isnan(v)), len(pending))
            members[i], pending = set(pending[:cut]), pending[cut + 1:]
    tests = [lambda v, s: v <= s, lambda v, s: v < s, lambda v, s: v >= s, lambda v, s: v > s,
             lambda v, s: v == s, lambda v, s: v != s, lambda v, s: v in s]

    def leaf_of(sample, node):
        while True:
            v = sample[nodes_featureids[node]]
            split = members.get(node) if modes[node] == 6 else splits[node]
            go = tests[modes[node]](v, split) or (bool(missing[node]) and math.isnan(v))
            nxt, is_leaf = ((nodes_truenodeids[node], nodes_trueleafs[node]) if go
                            else (nodes_falsenodeids[node], nodes_falseleafs[node]))
            if is_leaf:
                return nxt
            node = nxt

    rows = x.double().cpu().tolist()
    init = {0: 0.0, 1: 0.0, 2: math.inf, 3: -math.inf}[aggregate_function]
    out = torch.full((len(rows), n_targets), init, dtype=torch.float64)
    for r, sample in enumerate(rows):
        for root in tree_roots:
            leaf = leaf_of(sample, root)
            t, w = leaf_targetids[leaf], weights[leaf]
            if aggregate_function == 1:
                out[r, t] += w
            elif aggregate_function == 0:
                out[r, t] += w / len(tree_roots)
            elif aggregate_function == 2:
                out[r, t] = min(float(out[r, t]), w)
            else:
                out[r, t] = max(float(out[r, t]), w)
    return _transform(out, post_transform).to(x.dtype).to(x.device)
