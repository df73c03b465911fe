"""Tree ensembles by vectorised level-by-level traversal: all (row, tree) pairs advance one level per step.

traverse_perfect (depth D ≤ 10 and trees·2^D ≤ 2^18, no ∈ nodes): at build time every tree is padded to a complete binary tree of depth D in
heap order (a leaf above depth D becomes a node whose two subtrees are copies of it), so a step is
    node = t·(2^D − 1) + i;  go = x[r, f[node]] m θ[node]  (∨ NaN ∧ tracks-true);  i ← 2i + 1 + ¬go
and after D steps leaf = i − (2^D − 1): 2 gathers per step (packed [f, θ] row, x), no child-index arrays.
traverse: flat int32 node arrays over all trees (_Flat): for a few rows every node's test at once and D gathers
through the resulting next-node table, for many rows level by level over the visited nodes only.
The leaf votes aggregate as in the reference (trees_common.Compiled.finish).
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


class _Flat:
    """The canonical node arrays as flat int32/threshold vectors over all trees (built once); three plans a call:

    whole forest (few rows): every node's test at once, v = x[:, f] (N, nodes), next = where(v m θ, true, false), then
        walk:  D gathers cur ← next[cur] from the roots (3 + D ops), or
        jump:  ⌈log₂ D⌉ squarings next ← next[next] (leaves point at themselves, so after k of them next[n] is 2ᵏ
               levels down), then next[:, roots] (4 + ⌈log₂ D⌉ ops: batch 1 of a depth-11 forest, 8 ops);
    level by level (many rows): only the visited nodes, per level n = cur, go = x[r, f[n]] m θ[n],
        cur ← false[n] + go·(true[n] − false[n]) — 7 ops per level over (N, trees) entries.
    `plan(N)` picks the cheapest by a cost model measured on the CPU (bench/trees.py).
    Traffic: whole ≈ N·nodes·13 bytes + walk D·N·trees / jump ⌈log₂ D⌉·N·nodes gathers; level ≈ D·N·trees·20 bytes.
    ∈ (set) nodes use the reference's step (Forest.step)."""

    # measured on the CPU (1 thread, bench forests): ~8 µs a torch op, ~5 ns a (row, node) entry of the whole table,
    # ~5 ns a gathered entry, ~5 ns a (row, tree, level) visit of the walk, 7 ops a level → whole below ~30 rows
    # (RF100), ~4 rows (GB500)
    _OP_NS, _WHOLE_NS, _GATHER_NS, _LEVEL_NS, _LEVEL_OPS = 8000, 5, 5, 5, 7

    def __init__(self, forest: Forest):
        self.f = forest
        i32 = torch.int32
        self.feat, self.true, self.false = forest.feature.to(i32), forest.true.to(i32), forest.false.to(i32)
        self.delta = self.true - self.false
        self.thr = forest.threshold
        self.roots = forest.roots.to(i32)
        self.modes = forest.modes_present
        self.member = 6 in self.modes
        self.miss = forest.missing if bool(forest.missing.any()) else None
        self.mode = forest.mode if len(self.modes) > 1 else None
        self.depth = forest.depth

    def _go(self, v, thr, mode, miss):
        if self.mode is None:
            go = _CMP[self.modes[0]](v, thr) if self.modes else torch.zeros_like(v, dtype=torch.bool)
        else:
            go = torch.zeros_like(v, dtype=torch.bool)
            for k in self.modes:
                go |= (mode == k) & _CMP[k](v, thr)
        if miss is not None:
            go |= miss & torch.isnan(v)
        return go

    def plan(self, n: int) -> str:
        """'jump', 'walk' or 'level' for n rows: the cheapest by the cost model (class attributes)."""
        t, d, nodes = self.roots.numel(), self.depth, self.f.n_nodes
        hops = max(1, (d - 1).bit_length())
        table = 3 * self._OP_NS + n * nodes * self._WHOLE_NS
        cost = {"walk": table + d * (self._OP_NS + n * t * self._GATHER_NS),
                "jump": table + (hops + 1) * self._OP_NS + n * (hops * nodes + t) * self._GATHER_NS,
                "level": d * (self._LEVEL_OPS * self._OP_NS + n * t * self._LEVEL_NS)}
        return min(cost, key=cost.get)

    def leaves(self, x: torch.Tensor) -> torch.Tensor:
        if self.member:
            return self.f.leaves(x)
        n = x.shape[0]
        cur = self.roots.unsqueeze(0).expand(n, -1)      # a view: nothing allocated (CUDA graphs keep no stale start)
        plan = self.plan(n) if self.depth else "walk"
        if plan != "level":
            nxt = torch.where(self._go(x.index_select(1, self.feat), self.thr, self.mode, self.miss),
                              self.true, self.false)
            if plan == "jump":
                for _ in range(max(1, (self.depth - 1).bit_length())):
                    nxt = nxt.gather(1, nxt)
                return nxt.index_select(1, self.roots)
            for _ in range(self.depth):
                cur = nxt.gather(1, cur)
            return cur
        shape = cur.shape
        for _ in range(self.depth):
            c = cur.reshape(-1)
            v = x.gather(1, self.feat.index_select(0, c).view(shape))
            go = self._go(v, self.thr.index_select(0, c).view(shape),
                          None if self.mode is None else self.mode.index_select(0, c).view(shape),
                          None if self.miss is None else self.miss.index_select(0, c).view(shape))
            cur = self.false.index_select(0, c).view(shape) + go * self.delta.index_select(0, c).view(shape)
        return cur


def _build(layer, device, perfect: bool):
    comp = Compiled(layer, device)
    tables: dict = {}

    def find(forest, xb):
        key = forest.threshold.dtype
        if key not in tables:
            tables[key] = _Perfect(comp.attrs, forest, device) if perfect else _Flat(forest)
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


@tactic("TreeEnsembleRegressor", name="traverse", priority=35)
@tactic("TreeEnsembleClassifier", name="traverse", priority=35)
class Traverse:
    """Flat arrays (_Flat), blocked rows. The CPU's untimed choice: on the bench's forests it beat gemm and
    traverse_perfect at batch 1 and 1000 (bench/results/trees-cpu.md); CUDA builds time all tactics."""

    @staticmethod
    def supports(layer, device):
        return None

    @staticmethod
    def build(layer, cfg, device):
        return _build(layer, device, perfect=False)
