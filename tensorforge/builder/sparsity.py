"""--sparsity=disable|enable|force: 2:4 structured-sparse weights for the GPU's sparse tensor cores.

Entry point: `apply_sparsity(net, mode, device) -> SparsityReport`, before the graph passes. A weight has the 2:4
pattern when every group of four consecutive elements along the reduction (K) dimension holds at most two
non-zeros. `force` first prunes every Conv/Gemm/MatMul weight to that pattern — in each group the two elements of
largest |w| stay (the earlier one on ties), the other two become 0 — for speed runs: accuracy is not kept (warned).
`enable`/`force` then turn each Gemm/MatMul with a constant 2-D weight that has the pattern into SparseGemm
(ir/ops/sparse.py), whose tactics time a semi-structured sparse GEMM against a dense one (CUDA; CPU builds keep
dense, with the reason). SparseGemm takes no fused epilogue: the GEMM's bias stays in it, activations run after.
"""

from dataclasses import dataclass, field

import torch

from ..ir import Layer, Network
from ..util.log import get_logger


@dataclass
class SparsityReport:
    mode: str
    pruned: list[str] = field(default_factory=list)
    sparse: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def _groups(w: torch.Tensor, axis: int) -> torch.Tensor | None:
    """w with `axis` last, split into groups of 4 along it: [..., K/4, 4]; None when K is not a multiple of 4."""
    moved = w.movedim(axis, -1)
    if moved.shape[-1] % 4:
        return None
    return moved.reshape(*moved.shape[:-1], moved.shape[-1] // 4, 4)


def is_2_4(w: torch.Tensor, axis: int = -1) -> bool:
    g = _groups(w, axis)
    return g is not None and bool(((g != 0).sum(-1) <= 2).all())


def prune_2_4(w: torch.Tensor, axis: int = -1) -> torch.Tensor:
    """Keep the two largest |w| of every group of four along `axis` (earlier index on ties), zero the rest."""
    g = _groups(w, axis)
    if g is None:
        raise ValueError(f"dimension {axis} of a {list(w.shape)} weight is not a multiple of 4")
    idx = torch.argsort(g.abs(), dim=-1, descending=True, stable=True)[..., :2]
    mask = torch.zeros_like(g, dtype=torch.bool).scatter_(-1, idx, True)
    moved = torch.where(mask, g, torch.zeros_like(g)).reshape(w.movedim(axis, -1).shape)
    return moved.movedim(-1, axis).contiguous()


def _weight(net: Network, layer: Layer) -> tuple[str, int] | None:
    """(constant weight name, its K axis) of a Conv/Gemm/MatMul, or None."""
    if layer.op == "Conv" and len(layer.inputs) > 1 and layer.inputs[1] in net.constants:
        return layer.inputs[1], 1
    if layer.op == "Gemm" and layer.inputs[1] in net.constants:
        return layer.inputs[1], 1 if layer.attrs.get("transB", 0) else 0
    if layer.op == "MatMul" and layer.inputs[1] in net.constants and net.constants[layer.inputs[1]].dim() == 2:
        return layer.inputs[1], 0
    return None


def _sparse_reason(net: Network, layer: Layer, device: torch.device) -> str | None:
    if layer.op == "Gemm":
        a = layer.attrs
        if a.get("transA", 0) or a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0:
            return "Gemm with transA/alpha/beta is not rewritten"
        if len(layer.inputs) > 2 and layer.inputs[2] and (layer.inputs[2] not in net.constants
                                                           or net.constants[layer.inputs[2]].dim() > 1):
            return "its bias is not a constant vector"
    found = _weight(net, layer)
    if found is None:
        return "its weight is not a constant 2-D matrix"
    w = net.constants[found[0]]
    if w.dim() != 2 or not w.dtype.is_floating_point:
        return "its weight is not a 2-D float matrix"
    if not is_2_4(w, found[1]):
        return "its weight lacks the 2:4 pattern (use --sparsity=force to prune it, for speed runs)"
    if device.type != "cuda":
        return "semi-structured sparse GEMMs need CUDA; the dense GEMM runs"
    return None


def apply_sparsity(net: Network, mode: str, device: torch.device) -> SparsityReport:
    report = SparsityReport(mode)
    if mode == "disable":
        return report
    log = get_logger()
    if mode == "force":
        done = set()
        for layer in net.layers:
            found = _weight(net, layer) if layer.op in ("Conv", "Gemm", "MatMul") else None
            if found is None or found[0] in done:
                continue
            w = net.constants[found[0]]
            if _groups(w, found[1]) is None:
                report.skipped[layer.name] = f"K = {w.shape[found[1]]} is not a multiple of 4: not pruned"
                continue
            net.add_constant(found[0], prune_2_4(w, found[1]))
            done.add(found[0])
            report.pruned.append(layer.name)
        log.warning(f"--sparsity=force pruned {len(report.pruned)} weight(s) to 2:4 (half of each group of four set "
                    "to 0): a speed measurement, accuracy is not kept")
    out = []
    for layer in net.layers:
        if layer.op not in ("Gemm", "MatMul"):
            out.append(layer)
            continue
        why = _sparse_reason(net, layer, device)
        if why is not None:
            report.skipped[layer.name] = why
            out.append(layer)
            continue
        wname, axis = _weight(net, layer)
        if axis == 0:                       # B is [K, N]: store Wᵀ [N, K], the sparse operand's layout
            wname = net.add_constant(net.unique_name(f"{wname}/nk"), net.constants[wname].t().contiguous())
        bias = layer.inputs[2] if layer.op == "Gemm" and len(layer.inputs) > 2 and layer.inputs[2] else ""
        ins = [layer.inputs[0], wname] + ([bias] if bias else [])
        out.append(Layer(layer.name, "SparseGemm", ins, list(layer.outputs), {}, list(layer.origin)))
        report.sparse.append(layer.name)
    net.layers = out
    net.prune_tensors()
    for name, why in report.skipped.items():
        log.verbose(f"sparsity: {name} stays dense: {why}")
    log.info(f"sparsity={mode}: {len(report.sparse)} GEMM(s) with 2:4 weights get a sparse tactic to time")
    return report
