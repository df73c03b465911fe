"""Shared parts of the tree-ensemble tactics (trees_traverse.py, trees_gemm.py): compiled once per layer.

`Compiled(layer, device)` turns the canonical attributes (ir/ops/ml_trees.py) into device tensors at build or load
time: thresholds in float32 when every threshold is a float32 value and x is float32 (the comparison is then the
same as in float64), else float64; leaf votes in the op's summation dtype. `finish(x, leaves)` aggregates the
reached leaves of one row block and applies base values, post_transform and (classifiers) labels — the same
functions the reference uses, so tactics differ from it only in how they find the leaves.
Rows are processed in blocks so that the (rows, trees) index tensors stay near 2²² entries. Everything a call
needs is made here or on its first call (per-call cost: the tactic's traversal ops, then ~6 ops for the votes and
the finish; no host lists are walked, no tensors built from Python data).
"""

import torch

from ..ir.dtypes import dtype_from_name
from ..ir.ops.ml_post import post_transform
from ..ir.ops.ml_trees import Forest, add_base, aggregate, finish_classifier, scores_dtype, with_defaults

BLOCK_ENTRIES = 1 << 22


def fp32_exact(values) -> bool:
    t = torch.tensor(values, dtype=torch.float64)
    return bool((t.float().double() == t).all())


class Compiled:
    def __init__(self, layer, device):
        self.attrs = with_defaults(layer.attrs)
        self.op = layer.op
        self.device = device
        self._fp32_ok = fp32_exact(self.attrs["nodes_values"]) and (
            not self.attrs.get("membership_values")
            or all(fp32_exact(s) for s in self.attrs["membership_values"] if s))
        self._forests: dict[torch.dtype, Forest] = {}
        self._votes: dict[int, torch.Tensor] = {}
        self.n_trees = len(self.attrs["tree_roots"])
        self.all_positive = min(self.attrs["leaf_weights"] or [0]) >= 0
        # made once here, not per call: nothing is copied from the host while a CUDA graph is being captured
        base = self.attrs["base_values"]
        self._base = torch.tensor(base, dtype=torch.float64, device=device) if base else None
        if self._base is not None:          # in the summation dtype, as add_base would convert it on every call
            self._base = self._base.to(dtype_from_name(self.attrs["sum_dtype"]))
        self._labels = (torch.tensor(list(self.attrs["classlabels"]) or [0], dtype=torch.int64, device=device)
                        if layer.op == "TreeEnsembleClassifier" else None)
        # finish_classifier only asks whether every vote goes to one target (the binary-ensemble rule): say it once
        self._target_kinds = sorted(set(self.attrs["leaf_targetids"]))[:2]
        n_targets = int(self.attrs["n_targets"])
        self._k_used = min(n_targets, max(self.attrs["leaf_targetids"], default=0) + 1)   # votes beyond: all zero
        self._pad = n_targets - self._k_used

    def forest(self, x: torch.Tensor) -> tuple[Forest, torch.Tensor]:
        """The forest for x's dtype and x converted to its comparison dtype."""
        dt = torch.float32 if (x.dtype == torch.float32 and self._fp32_ok) else torch.float64
        if dt not in self._forests:
            self._forests[dt] = Forest(self.attrs, self.device, threshold_dtype=dt)
        return self._forests[dt], x.to(dt)

    def rows_per_block(self) -> int:
        return max(1, BLOCK_ENTRIES // max(1, self.n_trees * int(self.attrs["n_targets"])))

    def scores(self, forest: Forest, leaves: torch.Tensor) -> torch.Tensor:
        """SUM/AVERAGE: the votes pre-cast to the summation dtype, added tree by tree (cumsum) as the reference
        does; MIN/MAX: the reference's aggregation."""
        a = self.attrs
        if a["aggregate_function"] not in ("SUM", "AVERAGE"):
            return aggregate(forest, leaves, a["aggregate_function"], a["base_values"], a["sum_dtype"])
        key = id(forest)
        if key not in self._votes:           # only the targets anyone votes for (a binary forest: one column)
            self._votes[key] = forest.votes[:, :self._k_used].to(dtype_from_name(a["sum_dtype"])).contiguous()
        vals = self._votes[key].index_select(0, leaves.reshape(-1)).view(*leaves.shape, -1)
        out = vals.cumsum(1)[:, -1] if leaves.shape[1] else vals.new_zeros(leaves.shape[0], vals.shape[2])
        if self._pad:
            out = torch.nn.functional.pad(out, (0, self._pad))
        if a["aggregate_function"] == "AVERAGE":
            out = out / leaves.shape[1]
        return (add_base(out, self._base) if self._base is not None else out).double()   # base in the sum's dtype

    def finish(self, x: torch.Tensor, scores: torch.Tensor) -> list[torch.Tensor]:
        a = self.attrs
        out_dt = scores_dtype(x, a["out_dtype"])
        if self.op == "TreeEnsembleClassifier":
            labels, probs = finish_classifier(scores, leaf_targetids=self._target_kinds,
                                              classlabels=a["classlabels"], post_transform_kind=a["post_transform"],
                                              all_positive=self.all_positive, label_table=self._labels)
            return [labels, probs.to(out_dt)]
        return [post_transform(scores, a["post_transform"]).to(out_dt)]

    def run_blocks(self, x: torch.Tensor, find_leaves) -> list[torch.Tensor]:
        """find_leaves(forest, x_block) → (rows, trees) leaf node indices; aggregated block by block."""
        forest, xc = self.forest(x.reshape(x.shape[0], -1))
        step = self.rows_per_block()
        if xc.shape[0] <= step:
            return self.finish(x, self.scores(forest, find_leaves(forest, xc)))
        parts = [self.scores(forest, find_leaves(forest, xc[i:i + step])) for i in range(0, xc.shape[0], step)]
        scores = torch.cat(parts)
        return self.finish(x, scores)
