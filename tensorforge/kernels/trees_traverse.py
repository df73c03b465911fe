"""Tree ensembles by vectorised level-by-level traversal: all (row, tree) pairs advance one level per step.

traverse_perfect (depth D ≤ 10 and trees·2^D ≤ 2^18, no ∈ nodes): at build time every tree is padded to a complete binary tree of depth D in
heap order (a leaf above depth D becomes a node whose two subtrees are copies of it), so a step is
    node = t·(2^D − 1) + i;  go = x[r, f[node]] m θ[node]  (∨ NaN ∧ tracks-true);  i ← 2i + 1 + ¬go
and after D steps leaf = i − (2^D − 1): 3 gathers per step (f, θ, x), no child-index arrays.
traverse: the canonical node arrays, 5 gathers per step (f, θ, x, true, false), any depth or mode.
Traffic per step and row block: (rows × trees) int64 indices read and written, plus the gathers (cache resident for
small forests). The leaf votes aggregate as in the reference (trees_common.Compiled.finish).
"""

import torch

from ..ir.ops.ml_trees import _CMP, LEAF, Forest
from .registry import tactic
from .trees_common import Compiled, with_defaults

MAX_PERFECT_DEPTH = 10
MAX_PERFECT_SLOTS = 1 << 18


def _perfect_reason(layer) -> str | None:
    a = with_defaults(layer.attrs)
    if 6 in set(a["nodes_modes"]):
        return "BRANCH_MEMBER nodes (set tests) need the generic layout"
    from ..ir.ops.ml_trees import _depth
    d = _depth(a)
    if d > MAX_PERFECT_DEPTH or len(a["tree_roots"]) << d > MAX_PERFECT_SLOTS:
        return f"depth {d} × {len(a['tree_roots'])} trees is too large to pad to complete trees"
    return None


class _Perfect:
    """Heap-ordered complete trees of depth D, built from the canonical lists."""

    def __init__(self, attrs: dict, forest: Forest, device):
        d = forest.depth
        inner, width = (1 << d) - 1, 1 << d
        t_count = len(attrs["tree_roots"])
        feat = [0] * (t_count * max(inner, 1))
        thr = [0.0] * (t_count * max(inner, 1))
        pad_mode = min(set(attrs["nodes_modes"]) - {LEAF}, default=0)     # padding nodes: either way is the same
        mode = [pad_mode] * (t_count * max(inner, 1))
        miss = [0] * (t_count * max(inner, 1))
        leaf = [0] * (t_count * width)
        m, f, v = attrs["nodes_modes"], attrs["nodes_featureids"], attrs["nodes_values"]
        tr, fa, mi = attrs["nodes_truenodeids"], attrs["nodes_falsenodeids"], attrs["nodes_missing_value_tracks_true"]
        for t, root in enumerate(attrs["tree_roots"]):
            stack = [(root, 0, 0)]
            while stack:
                node, pos, depth = stack.pop()
                if depth == d:
                    leaf[t * width + pos - inner] = node
                    continue
                slot = t * inner + pos
                if m[node] == LEAF:
                    stack += [(node, 2 * pos + 1, depth + 1), (node, 2 * pos + 2, depth + 1)]
                    continue
                feat[slot], thr[slot], mode[slot], miss[slot] = f[node], v[node], m[node], mi[node]
                stack += [(tr[node], 2 * pos + 1, depth + 1), (fa[node], 2 * pos + 2, depth + 1)]
        dt = forest.threshold.dtype
        self.depth, self.inner, self.width = d, inner, width
        self.feat = torch.tensor(feat, dtype=torch.int64, device=device)
        self.thr = torch.tensor(thr, dtype=dt, device=device)
        self.mode = torch.tensor(mode, dtype=torch.int8, device=device)
        self.miss = torch.tensor(miss, dtype=torch.bool, device=device) if any(miss) else None
        self.modes = sorted(set(mode)) if inner else []
        self.leaf = torch.tensor(leaf, dtype=torch.int64, device=device)
        self.tree_base = torch.arange(t_count, device=device) * inner
        self.leaf_base = torch.arange(t_count, device=device) * width

    def leaves(self, x: torch.Tensor) -> torch.Tensor:
        i = torch.zeros(x.shape[0], self.tree_base.numel(), dtype=torch.int64, device=x.device)
        for _ in range(self.depth):
            node = self.tree_base + i
            val = x.gather(1, self.feat[node])
            th = self.thr[node]
            if len(self.modes) == 1:
                go = _CMP[self.modes[0]](val, th)
            else:
                mode = self.mode[node]
                go = torch.zeros_like(val, dtype=torch.bool)
                for k in self.modes:
                    go |= (mode == k) & _CMP[k](val, th)
            if self.miss is not None:
                go |= self.miss[node] & torch.isnan(val)
            i = 2 * i + 2 - go.long()
        return self.leaf[self.leaf_base + i - self.inner]


def _build(layer, device, perfect: bool):
    comp = Compiled(layer, device)
    tables: dict = {}

    def find(forest, xb):
        if not perfect:
            return forest.leaves(xb)
        key = forest.threshold.dtype
        if key not in tables:
            tables[key] = _Perfect(comp.attrs, forest, device)
        return tables[key].leaves(xb)

    def run(inputs):
        return comp.run_blocks(inputs[0], find)
    return run


@tactic("TreeEnsembleRegressor", name="traverse_perfect", priority=20)
@tactic("TreeEnsembleClassifier", name="traverse_perfect", priority=20)
class TraversePerfect:
    """layout=perfect (module docstring)."""

    @staticmethod
    def supports(layer, device):
        return _perfect_reason(layer)

    @staticmethod
    def build(layer, cfg, device):
        return _build(layer, device, perfect=True)


@tactic("TreeEnsembleRegressor", name="traverse", priority=10)
@tactic("TreeEnsembleClassifier", name="traverse", priority=10)
class Traverse:
    """layout=generic (module docstring), blocked rows."""

    @staticmethod
    def supports(layer, device):
        return None

    @staticmethod
    def build(layer, cfg, device):
        return _build(layer, device, perfect=False)
