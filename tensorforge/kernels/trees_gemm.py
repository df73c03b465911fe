"""Tree ensembles in the GEMM form (Hummingbird's tree compilation), batched over trees.

Compiled at build time, per tree t with internal nodes I and leaves L (padded to the largest tree):
    A  feature of each internal node          (T, I)      — applied as a gather, x_sel = x[:, A]  (exact, NaN-safe)
    B  threshold and test of each node         (T, I)
    C  +1 where leaf l is in node i's true subtree, −1 in its false subtree, else 0   (T, I, L)
    D  number of +1 entries of each leaf's column (its true-edge ancestors; −1 for padding leaves)  (T, L)
    E  the leaf votes (reference aggregation, trees_common)
Run: S = [x_sel  m  B] ∈ {0,1}  (N, T, I);  P = S ·_t C  (T batched (N, I)×(I, L) GEMMs);  leaf = argmax(P == D).
P == D exactly when every true-ancestor test held and no false-ancestor test did: the one reached leaf.
Untimed (CPU) builds prefer the flat traversal (trees_traverse.py), faster on the CPU at batch 1 and 1000.
Cost per row: T·I·L multiply-adds (dense), so the tactic is offered for trees with I·L ≤ 2^16 (shallow ensembles,
gradient boosting); deep random forests take the traversal tactics. Small integers: float32 GEMMs are exact.
"""

import torch

from ..ir.ops.ml_trees import _CMP, LEAF
from .registry import tactic
from .trees_common import Compiled, with_defaults

MAX_CELLS = 1 << 16
SMALL_CPU_BATCH = 64


def _trees(a: dict):
    """Per tree: (internal nodes in visit order, leaves, {leaf: [(node, +1/−1)]})."""
    m, tr, fa = a["nodes_modes"], a["nodes_truenodeids"], a["nodes_falsenodeids"]
    out = []
    for root in a["tree_roots"]:
        inner, leaves, path = [], [], {}
        stack = [(root, [])]
        while stack:
            node, anc = stack.pop()
            if m[node] == LEAF:
                leaves.append(node)
                path[node] = anc
                continue
            inner.append(node)
            stack += [(fa[node], anc + [(node, -1)]), (tr[node], anc + [(node, 1)])]
        out.append((inner, leaves, path))
    return out


def _reason(layer) -> str | None:
    a = with_defaults(layer.attrs)
    if 6 in set(a["nodes_modes"]):
        return "BRANCH_MEMBER nodes (set tests) are not compiled to the GEMM form"
    sizes = _trees(a)
    i_max = max([len(t[0]) for t in sizes] + [1])
    l_max = max([len(t[1]) for t in sizes] + [1])
    if i_max * l_max > MAX_CELLS:
        return f"largest tree has {i_max} nodes × {l_max} leaves > {MAX_CELLS} path-matrix cells (deep trees: traverse)"
    return None


class _Gemm:
    def __init__(self, attrs: dict, thr_dtype, device):
        trees = _trees(attrs)
        t_count = len(trees)
        i_max = max([len(t[0]) for t in trees] + [1])
        l_max = max([len(t[1]) for t in trees] + [1])
        feat = torch.zeros(t_count, i_max, dtype=torch.int64)
        thr = torch.zeros(t_count, i_max, dtype=torch.float64)
        mode = torch.full((t_count, i_max), -1, dtype=torch.int8)
        miss = torch.zeros(t_count, i_max, dtype=torch.bool)
        c = torch.zeros(t_count, i_max, l_max, dtype=torch.float32)
        d = torch.full((t_count, l_max), -1.0, dtype=torch.float32)
        leaf = torch.zeros(t_count, l_max, dtype=torch.int64)
        f, v, m, mi = (attrs["nodes_featureids"], attrs["nodes_values"], attrs["nodes_modes"],
                       attrs["nodes_missing_value_tracks_true"])
        for t, (inner, leaves, path) in enumerate(trees):
            col = {n: k for k, n in enumerate(inner)}
            for k, n in enumerate(inner):
                feat[t, k], thr[t, k], mode[t, k], miss[t, k] = f[n], v[n], m[n], bool(mi[n])
            for j, lf in enumerate(leaves):
                leaf[t, j] = lf
                d[t, j] = sum(1 for _, s in path[lf] if s > 0)
                for n, s in path[lf]:
                    c[t, col[n], j] = s
        self.modes = sorted(set(mode[mode >= 0].tolist()))
        self.feat = feat.reshape(-1).to(device)
        self.shape = (t_count, i_max)
        self.thr = thr.to(device, thr_dtype)
        self.mode = mode.to(device)
        self.miss = miss.to(device) if bool(miss.any()) else None
        self.c, self.d, self.leaf = c.to(device), d.to(device), leaf.to(device)

    def leaves(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        v = x.index_select(1, self.feat).reshape(n, *self.shape)              # (N, T, I)
        if len(self.modes) == 1:
            s = _CMP[self.modes[0]](v, self.thr)
        else:
            s = torch.zeros_like(v, dtype=torch.bool)
            for k in self.modes:
                s |= (self.mode == k) & _CMP[k](v, self.thr)
        if self.miss is not None:
            s |= self.miss & torch.isnan(v)
        p = torch.bmm(s.to(torch.float32).transpose(0, 1), self.c)           # (T, N, L)
        local = (p == self.d.unsqueeze(1)).to(torch.int8).argmax(-1)           # (T, N)
        return self.leaf.gather(1, local).T                                    # (N, T)


@tactic("TreeEnsembleRegressor", name="gemm", priority=30)
@tactic("TreeEnsembleClassifier", name="gemm", priority=30)
class TreeGemm:
    @staticmethod
    def supports(layer, device):
        return _reason(layer)

    @staticmethod
    def fits(layer, cfg, inputs):
        """On the CPU a handful of rows is cheaper to traverse (bench/trees.py: RF batch 1, 4 ms vs 40 ms)."""
        x = inputs[0] if inputs else None
        # CPU builds judge meta tensors of the opt-point shapes; CUDA builds time real ones (and keep gemm in the race)
        if x is not None and x.device.type != "cuda" and x.dim() and x.shape[0] < SMALL_CPU_BATCH:
            return f"{x.shape[0]} rows at the opt point (< {SMALL_CPU_BATCH}): the traversals are cheaper on the CPU"
        return None

    @staticmethod
    def build(layer, cfg, device):
        comp = Compiled(layer, device)
        tables: dict = {}

        def find(forest, xb):
            key = forest.threshold.dtype
            if key not in tables:
                tables[key] = _Gemm(comp.attrs, key, device)
            return tables[key].leaves(xb)

        def run(inputs):
            return comp.run_blocks(inputs[0], find)
        return run
