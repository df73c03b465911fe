"""Tree ensembles (ai.onnx.ml TreeEnsembleRegressor/Classifier 1–3 and TreeEnsemble 5) in one canonical form.

The importer turns every ONNX encoding into flat per-node lists over all trees (global node indices):
    nodes_featureids f, nodes_values θ, nodes_modes m (0 ≤, 1 <, 2 ≥, 3 >, 4 =, 5 ≠, 6 ∈, 7 leaf),
    nodes_truenodeids / nodes_falsenodeids (a leaf points at itself), nodes_missing_value_tracks_true,
    tree_roots, the leaves' votes (leaf_nodeids, leaf_targetids, leaf_weights) and membership_values
    (one list per ∈ node, in node order).
A sample goes true at node n when  x[f] m θ  or (x[f] is NaN and the node tracks missing values as true).
Per target the votes of the reached leaves aggregate (SUM, AVERAGE = SUM / trees, MIN, MAX over the trees that
vote for it; a target nobody votes for is 0), base_values add, post_transform applies (ml_post.py).
`Forest` holds the lists as tensors; the reference walks all (sample, tree) pairs one level per step
(depth steps, O(N·T·depth) gathers, float64). Fast tactics: kernels/trees_traverse.py and kernels/trees_gemm.py.
"""

import torch

from ..dtypes import dtype_from_name
from ..opspec import REQUIRED, op
from .attr_tables import attr_table
from .ml_post import labels_of, post_transform

LEAF = 7
NODE_KEYS = ("nodes_featureids", "nodes_values", "nodes_modes", "nodes_truenodeids", "nodes_falsenodeids",
             "nodes_missing_value_tracks_true", "tree_roots", "leaf_nodeids", "leaf_targetids", "leaf_weights")
_COMMON = {**{k: REQUIRED for k in NODE_KEYS}, "membership_values": None, "n_targets": REQUIRED,
           "aggregate_function": "SUM", "post_transform": "NONE", "base_values": None, "out_dtype": None,
           "sum_dtype": "float64"}


class Forest:
    """The canonical attributes as tensors on `device` (thresholds float64 unless `threshold_dtype` says)."""

    def __init__(self, attrs: dict, device="cpu", threshold_dtype=torch.float64, index_dtype=torch.int64):
        a = attrs
        dev = torch.device(device)
        self.n_nodes = len(a["nodes_modes"])
        self.n_targets = int(a["n_targets"])
        self.feature = torch.tensor(a["nodes_featureids"], dtype=index_dtype, device=dev)
        self.threshold = torch.tensor(a["nodes_values"], dtype=threshold_dtype, device=dev)
        self.mode = torch.tensor(a["nodes_modes"], dtype=torch.int8, device=dev)
        self.true = torch.tensor(a["nodes_truenodeids"], dtype=index_dtype, device=dev)
        self.false = torch.tensor(a["nodes_falsenodeids"], dtype=index_dtype, device=dev)
        self.missing = torch.tensor(a["nodes_missing_value_tracks_true"], dtype=torch.bool, device=dev)
        self.roots = torch.tensor(a["tree_roots"], dtype=index_dtype, device=dev)
        self.modes_present = sorted(set(a["nodes_modes"]) - {LEAF})
        # dense leaf votes: values (nodes, targets) summed per (leaf, target), has = "votes for it"
        votes = torch.zeros(self.n_nodes, self.n_targets, dtype=torch.float64)
        has = torch.zeros(self.n_nodes, self.n_targets, dtype=torch.bool)
        nodes = torch.tensor(a["leaf_nodeids"], dtype=torch.int64)
        tgts = torch.tensor(a["leaf_targetids"], dtype=torch.int64)
        votes.index_put_((nodes, tgts), torch.tensor(a["leaf_weights"], dtype=torch.float64), accumulate=True)
        has[nodes, tgts] = True
        self.votes, self.has = votes.to(dev), has.to(dev)
        self.members = None
        if 6 in self.modes_present:                      # (nodes, widest set) table padded with NaN
            sets = a["membership_values"] or []
            width = max([len(s) for s in sets] + [1])
            table = torch.full((self.n_nodes, width), float("nan"), dtype=torch.float64)
            for node, values in zip([i for i, m in enumerate(a["nodes_modes"]) if m == 6], sets):
                table[node, :len(values)] = torch.tensor(values, dtype=torch.float64)
            self.members = table.to(dev, threshold_dtype)
        self.depth = _depth(a)

    def step(self, x: torch.Tensor, cur: torch.Tensor) -> torch.Tensor:
        """One level: (N, T) node indices → their children (leaves stay)."""
        v = x.gather(1, self.feature[cur])
        th, m = self.threshold[cur], self.mode[cur]
        if len(self.modes_present) == 1 and self.modes_present[0] != 6:
            go = _CMP[self.modes_present[0]](v, th)
        else:
            go = torch.zeros_like(v, dtype=torch.bool)
            for k in self.modes_present:
                hit = ((v.unsqueeze(-1) == self.members[cur]).any(-1) if k == 6 else _CMP[k](v, th))
                go |= (m == k) & hit
        go |= self.missing[cur] & torch.isnan(v)
        return torch.where(go, self.true[cur], self.false[cur])

    def leaves(self, x: torch.Tensor) -> torch.Tensor:
        cur = self.roots.unsqueeze(0).expand(x.shape[0], -1)
        for _ in range(self.depth):
            cur = self.step(x, cur)
        return cur


_CMP = {0: torch.le, 1: torch.lt, 2: torch.ge, 3: torch.gt, 4: torch.eq, 5: torch.ne}


def _depth(a: dict) -> int:
    """Longest root-to-leaf path (edges), iteratively over the global child lists."""
    modes, t, f = a["nodes_modes"], a["nodes_truenodeids"], a["nodes_falsenodeids"]
    best, stack = 0, [(r, 0) for r in a["tree_roots"]]
    while stack:
        n, d = stack.pop()
        if modes[n] == LEAF:
            best = max(best, d)
            continue
        if d > len(modes):
            raise ValueError("tree ensemble has a cycle")
        stack += [(t[n], d + 1), (f[n], d + 1)]
    return best


def aggregate(forest: Forest, leaves: torch.Tensor, aggregate_function: str, base_values,
              sum_dtype: str = "float64") -> torch.Tensor:
    """(N, T) reached leaves → (N, targets) float64 scores before post_transform. SUM/AVERAGE add the trees in
    order in `sum_dtype`, the leaf weights' type, as onnxruntime does (float32 weights: float32 running sums, so
    exact class-probability ties break the same way)."""
    vals, has = forest.votes[leaves], forest.has[leaves]             # (N, T, K)
    n_trees = leaves.shape[1]
    if aggregate_function in ("SUM", "AVERAGE"):
        acc = dtype_from_name(sum_dtype)
        out = vals.to(acc).cumsum(1)[:, -1] if n_trees else vals.new_zeros(vals.shape[0], vals.shape[2])
        if aggregate_function == "AVERAGE":
            out = out / n_trees
        out = add_base(out, base_values).double()
        return out
    elif aggregate_function in ("MIN", "MAX"):
        big = float("inf") if aggregate_function == "MIN" else float("-inf")
        red = torch.where(has, vals, torch.full_like(vals, big))
        red = red.amin(1) if aggregate_function == "MIN" else red.amax(1)
        out = torch.where(has.any(1), red, torch.zeros_like(red))
    else:
        raise ValueError(f"unknown aggregate_function {aggregate_function!r}")
    return add_base(out, base_values)


def add_base(scores: torch.Tensor, base_values) -> torch.Tensor:
    """scores + base_values (a list, or a tensor made once by a tactic); a length that fits neither one value nor
    one per target is ignored, as onnxruntime does."""
    if base_values is not None and len(base_values):
        b = base_values.to(scores.device, scores.dtype) if isinstance(base_values, torch.Tensor) else \
            attr_table(base_values, scores.dtype, scores.device)
        if b.numel() in (1, scores.shape[1]):
            scores = scores + b.reshape(1, -1)
    return scores


def finish_classifier(scores: torch.Tensor, *, leaf_targetids, classlabels, post_transform_kind: str,
                      all_positive: bool, label_table: torch.Tensor | None = None):
    """Labels and probabilities, as onnxruntime writes them.
    Binary ensembles (two labels, every vote for target 0 — how gradient boosting writes two classes) score s:
      all leaf weights ≥ 0: label = class 1 iff s > ½, probabilities (1 − s, s), no transform;
      otherwise:            label = class 1 iff s > 0,  probabilities post_transform((−s, s)).
    Others: label = the arg-max class of the scores (first on ties), probabilities post_transform(scores)."""
    n_classes = len(classlabels)
    if len(set(leaf_targetids)) == 1 and n_classes == 2:
        s = scores[:, :1]
        table = label_table if label_table is not None else attr_table(classlabels, torch.int64, scores.device)
        if all_positive:
            return table[(s[:, 0] > 0.5).long()], torch.cat([1 - s, s], dim=1)
        return table[(s[:, 0] > 0).long()], post_transform(torch.cat([-s, s], dim=1), post_transform_kind)
    probs = post_transform(scores, post_transform_kind)
    if label_table is not None:
        return label_table[scores.argmax(1)], probs
    return labels_of(scores.argmax(1), classlabels), probs


def with_defaults(attrs: dict) -> dict:
    return {**{k: v for k, v in _COMMON.items() if v is not REQUIRED}, **attrs}


def scores_dtype(x, name):
    """The scores' dtype: the attribute's (ml opsets 1–3 write float) or the input's (TreeEnsemble 5)."""
    return dtype_from_name(name) if name else x.dtype


def _infer_reg(x, *, n_targets, out_dtype=None, **_):
    return torch.empty(x.shape[0], int(n_targets), dtype=scores_dtype(x, out_dtype), device="meta")


def _infer_cls(x, *, classlabels, out_dtype=None, **_):
    return (torch.empty(x.shape[0], dtype=torch.int64, device="meta"),
            torch.empty(x.shape[0], len(classlabels), dtype=scores_dtype(x, out_dtype), device="meta"))


@op("TreeEnsembleRegressor", attrs=_COMMON, infer=_infer_reg)
def tree_ensemble_regressor(x, **attrs):
    """Scores (N, n_targets) of the canonical ensemble (module docstring), in x's dtype."""
    attrs = with_defaults(attrs)
    forest = Forest(attrs, x.device)
    scores = aggregate(forest, forest.leaves(x.double()), attrs["aggregate_function"], attrs["base_values"],
                       attrs["sum_dtype"])
    return post_transform(scores, attrs["post_transform"]).to(scores_dtype(x, attrs["out_dtype"]))


@op("TreeEnsembleClassifier", attrs={**_COMMON, "classlabels": REQUIRED}, infer=_infer_cls)
def tree_ensemble_classifier(x, **attrs):
    """(labels int64 (N,), probabilities (N, classes)): the summed votes per class (module docstring),
    then `finish_classifier`."""
    attrs = with_defaults(attrs)
    forest = Forest(attrs, x.device)
    scores = aggregate(forest, forest.leaves(x.double()), attrs["aggregate_function"], attrs["base_values"],
                       attrs["sum_dtype"])
    labels, probs = finish_classifier(scores, leaf_targetids=attrs["leaf_targetids"],
                                      classlabels=attrs["classlabels"], post_transform_kind=attrs["post_transform"],
                                      all_positive=min(attrs["leaf_weights"] or [0]) >= 0)
    return labels, probs.to(scores_dtype(x, attrs["out_dtype"]))
