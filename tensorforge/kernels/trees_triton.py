"""Tree ensembles on the GPU: one Triton program walks BLOCK rows through every tree of the padded complete-tree
layout (trees_traverse._Perfect) and sums the leaf votes in registers, in tree order.

    per program: rows r₀…r₀+BLOCK;  for t in trees:  i = 0;  DEPTH times: node = t·(2^D−1) + i,
                 go = x[r, f[node]] m θ[node] (∨ NaN ∧ tracks-true);  i ← 2i + 1 + ¬go;
                 acc[r, :] += votes[leaf[t·2^D + i − (2^D−1)], :]
Traffic: x rows read D·T times (cached: F floats per row), the node tables (f, θ: 8 B per slot) once per program,
(rows × targets) float32 written once — no (rows × trees) index tensors in memory, one launch.
Applies to SUM/AVERAGE ensembles with float32 leaf sums (ml opsets 1–3 as converters write them), float32
thresholds, one branch mode, depth 1–10; base values, post_transform and labels run after it (trees_common).
CPU tests build it directly under TRITON_INTERPRET=1 (registry.triton_device_reason keeps selection to CUDA).
"""

import torch
import triton
import triton.language as tl

from ..ir.ops.ml_trees import LEAF
from .registry import tactic, triton_device_reason
from .trees_common import Compiled, with_defaults
from .trees_traverse import _perfect_reason, _Perfect


@triton.jit
def _walk(x_ptr, feat_ptr, thr_ptr, miss_ptr, leaf_ptr, votes_ptr, out_ptr, N, F, T, K,
          INNER: tl.constexpr, WIDTH: tl.constexpr, DEPTH: tl.constexpr, MODE: tl.constexpr,
          HAS_MISS: tl.constexpr, BLOCK: tl.constexpr, KP: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    rmask = rows < N
    ks = tl.arange(0, KP)
    kmask = ks < K
    acc = tl.zeros((BLOCK, KP), dtype=tl.float32)
    for t in range(T):
        i = tl.zeros((BLOCK,), dtype=tl.int32)
        for _ in tl.static_range(DEPTH):
            node = t * INNER + i
            f = tl.load(feat_ptr + node, mask=rmask, other=0)
            th = tl.load(thr_ptr + node, mask=rmask, other=0.0)
            v = tl.load(x_ptr + rows.to(tl.int64) * F + f, mask=rmask, other=0.0)
            if MODE == 0:
                go = v <= th
            elif MODE == 1:
                go = v < th
            elif MODE == 2:
                go = v >= th
            elif MODE == 3:
                go = v > th
            elif MODE == 4:
                go = v == th
            else:
                go = v != th
            if HAS_MISS:
                m = tl.load(miss_ptr + node, mask=rmask, other=0)
                go = go | ((m != 0) & (v != v))
            i = 2 * i + 2 - go.to(tl.int32)
        leaf = tl.load(leaf_ptr + t * WIDTH + i - INNER, mask=rmask, other=0)
        vals = tl.load(votes_ptr + leaf.to(tl.int64)[:, None] * K + ks[None, :],
                       mask=rmask[:, None] & kmask[None, :], other=0.0)
        acc += vals
    tl.store(out_ptr + rows.to(tl.int64)[:, None] * K + ks[None, :], acc, mask=rmask[:, None] & kmask[None, :])


def layout_reason(layer) -> str | None:
    """Why the kernel does not apply to this ensemble (None when it does)."""
    a = with_defaults(layer.attrs)
    why = _perfect_reason(layer)
    if why is not None:
        return why
    modes = set(a["nodes_modes"]) - {LEAF}
    if len(modes) != 1:
        return f"{len(modes)} branch modes (the kernel is specialised for one)"
    if a["aggregate_function"] not in ("SUM", "AVERAGE") or a["sum_dtype"] != "float32":
        return "only float32 SUM/AVERAGE ensembles (MIN/MAX or float64 sums take the torch tactics)"
    return None


class TritonTrees:
    """Build-time tables on the device, then `__call__(inputs)` → the op's outputs."""

    BLOCK = 128

    def __init__(self, layer, device):
        self.comp = Compiled(layer, device)
        self.mode = next(iter(set(self.comp.attrs["nodes_modes"]) - {LEAF}))
        self.device = device
        self._tables = None

    def _build(self, x):
        forest, _ = self.comp.forest(x)
        if forest.threshold.dtype != torch.float32:
            raise ValueError("thresholds are not float32 values (or x is not float32): the torch tactics apply")
        p = _Perfect(self.comp.attrs, forest, self.device)
        votes = forest.votes.to(torch.float32).contiguous()
        miss = p.miss.to(torch.int8) if p.miss is not None else torch.zeros(1, dtype=torch.int8, device=self.device)
        self._tables = (p, p.feat.to(torch.int32).contiguous(), p.thr.contiguous(), miss.contiguous(),
                        p.leaf.to(torch.int32).contiguous(), votes)

    def __call__(self, inputs):
        x = inputs[0]
        x2 = x.reshape(x.shape[0], -1).contiguous()
        if self._tables is None:
            self._build(x2)
        p, feat, thr, miss, leaf, votes = self._tables
        n, k = x2.shape[0], votes.shape[1]
        out = torch.empty(n, k, dtype=torch.float32, device=x2.device)
        grid = (triton.cdiv(max(n, 1), self.BLOCK),)
        _walk[grid](x2, feat, thr, miss, leaf, votes, out, n, x2.shape[1], p.tree_base.numel(), k,
                    INNER=p.inner, WIDTH=p.width, DEPTH=p.depth, MODE=self.mode, HAS_MISS=p.miss is not None,
                    BLOCK=self.BLOCK, KP=triton.next_power_of_2(k))
        a = self.comp.attrs
        if a["aggregate_function"] == "AVERAGE":
            out = out / p.tree_base.numel()
        if self.comp._base is not None:
            out = out + self.comp._base.to(out.dtype)
        return self.comp.finish(x, out.double())


@tactic("TreeEnsembleRegressor", name="triton_walk", priority=40)
@tactic("TreeEnsembleClassifier", name="triton_walk", priority=40)
class TritonWalk:
    @staticmethod
    def supports(layer, device):
        return triton_device_reason(device) or layout_reason(layer)

    @staticmethod
    def fits(layer, cfg, inputs):
        x = inputs[0] if inputs else None
        if x is not None and x.dtype != torch.float32:
            return f"input dtype {x.dtype} (the kernel compares float32)"
        return None

    @staticmethod
    def build(layer, cfg, device):
        return TritonTrees(layer, device)
