"""Tree ensembles by vectorised level-by-level traversal: all (row, tree) pairs advance one level per step.

traverse_perfect (depth D ≤ 10 and trees·2^D ≤ 2^18, no ∈ nodes): at build time every tree is padded to a complete binary tree of depth D in
heap order (a leaf above depth D becomes a node whose two subtrees are copies of it), so a step is
    node = t·(2^D − 1) + i;  go = x[r, f[node]] m θ[node]  (∨ NaN ∧ tracks-true);  i ← 2i + 1 + ¬go
and after D steps leaf = i − (2^D − 1): 2 gathers per step (packed [f, θ] row, x), no child-index arrays.
traverse: the canonical node arrays packed as [f, θ, true, false] rows, 2 gathers per step (any mode: more).
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

        # packed (slots, 2) table [feature, threshold] in float64 (node data exact): one gather per level
        self.table = torch.stack([self.feat.double(), self.thr.double()], 1) if inner else None

    def leaves(self, x: torch.Tensor) -> torch.Tensor:
        n, t_count = x.shape[0], self.tree_base.numel()
        x = x.double()
        i = torch.zeros(n * t_count, dtype=torch.int64, device=x.device)
        base = self.tree_base.repeat(n)
        row = torch.arange(n, device=x.device).repeat_interleave(t_count) * x.shape[1]
        flat = x.reshape(-1)
        simple = len(self.modes) == 1 and self.miss is None
        for _ in range(self.depth):
            node = base + i
            rec = self.table.index_select(0, node)
            val = flat.take(row + rec[:, 0].long())
            if simple:
                go = _CMP[self.modes[0]](val, rec[:, 1])
            else:
                mode = self.mode.take(node)
                go = torch.zeros_like(val, dtype=torch.bool)
                for k in self.modes:
                    go |= (mode == k) & _CMP[k](val, rec[:, 1])
                if self.miss is not None:
                    go |= self.miss.take(node) & torch.isnan(val)
            i = 2 * i + 2 - go.long()
        return self.leaf.take(self.leaf_base.repeat(n) + i - self.inner).reshape(n, t_count)


class _Generic:
    """The canonical arrays packed as one (nodes, 4) float64 table [feature, threshold, true, false]: one gather,
    one x lookup, one compare and one select per level."""

    def __init__(self, forest: Forest):
        self.f = forest
        self.table = torch.stack([forest.feature.double(), forest.threshold.double(), forest.true.double(),
                                  forest.false.double()], 1)
        self.simple = len(forest.modes_present) == 1 and forest.modes_present[0] != 6 and not bool(forest.missing.any())

    def leaves(self, x: torch.Tensor) -> torch.Tensor:
        if not self.simple:
            return self.f.leaves(x)
        n, t_count = x.shape[0], self.f.roots.numel()
        flat = x.double().reshape(-1)
        cur = self.f.roots.repeat(n)
        row = torch.arange(n, device=x.device).repeat_interleave(t_count) * x.shape[1]
        cmp = _CMP[self.f.modes_present[0]]
        for _ in range(self.f.depth):
            rec = self.table.index_select(0, cur)
            go = cmp(flat.take(row + rec[:, 0].long()), rec[:, 1])
            cur = torch.where(go, rec[:, 2], rec[:, 3]).long()
        return cur.reshape(n, t_count)


def _build(layer, device, perfect: bool):
    comp = Compiled(layer, device)
    tables: dict = {}

    def find(forest, xb):
        key = forest.threshold.dtype
        if key not in tables:
            tables[key] = _Perfect(comp.attrs, forest, device) if perfect else _Generic(forest)
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
