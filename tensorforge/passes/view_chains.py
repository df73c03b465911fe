"""Chains of layout ops (Reshape, Transpose, Squeeze, Unsqueeze, Flatten) → the one op they amount to, or nothing.

Exporters leave chains that undo themselves: the dynamo export of `scaled_dot_product_attention` folds K's
heads (Reshape to (B·H, S, D)), transposes, unfolds (Reshape to (B, H, D, S)), and the attention rule then
transposes back — four ops whose composite is the identity. Each op is a view alone, but a Reshape of a
transposed view must copy (here B·H·S·D elements per layer), and the chain hides the identity from every rule.

How: for every maximal chain (each link the only reader of the previous output) of ≥ 2 layers, the composite is
evaluated on an index tensor (iota = 0, 1, 2, … in the input's shape) at every shape point; the chain becomes
    nothing      when the result is iota itself (readers use the input),
    Transpose(p) when the result is iota.permute(p) for one p at every point,
    Reshape(s)   when the result is iota in another shape (static shapes only: s is a constant).
Anything else stays. Element counts above `max_fold_elements` are not evaluated (the chain stays).
"""

import torch

from ..ir import Layer, Network
from ..ir.interpret import run_reference
from ..util.log import get_logger
from .pattern import Graph

VIEW_OPS = {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten"}


def _chain_from(g: Graph, head: Layer) -> list[Layer]:
    chain = [head]
    while True:
        out = chain[-1].outputs[0]
        users = g.consumers(out)
        if g.is_output(out) or len(users) != 1 or users[0].op not in VIEW_OPS or users[0].inputs[0] != out:
            return chain
        chain.append(users[0])


def _permutation(iota: torch.Tensor, result: torch.Tensor) -> list[int] | None:
    """p with iota.permute(p) == result, or None. Each output dim's step is the input stride it walks."""
    if result.dim() != iota.dim() or sorted(result.shape) != sorted(iota.shape):
        return None
    flat = result.reshape(-1)
    if flat.numel() == 0:
        return None
    unused = list(range(iota.dim()))
    perm = []
    for j in range(result.dim()):
        step = int(flat[result.stride(j)] - flat[0]) if result.shape[j] > 1 else None
        pick = next((d for d in unused if iota.shape[d] == result.shape[j]
                     and (step is None or iota.stride(d) == step)), None)
        if pick is None:
            return None
        unused.remove(pick)
        perm.append(pick)
    return perm if torch.equal(iota.permute(perm), result) else None


def _composite(g: Graph, chain: list[Layer], max_elements: int) -> tuple[str, object] | None:
    """("identity", None) | ("transpose", perm) | ("reshape", shape) holding at every shape point, or None."""
    xs = g.values(chain[0].inputs[0])
    if xs is None:
        return None
    found = set()
    for point, x in enumerate(xs):
        if x.numel() > max_elements or x.numel() == 0:
            return None
        iota = torch.arange(x.numel()).reshape(x.shape)
        cur = iota
        for layer in chain:
            rest = []
            for name in layer.inputs[1:]:
                vals = g.values(name) if name else None
                if name and (vals is None or vals[point].device.type == "meta"):
                    return None            # a shape computed on the device: not evaluable here
                rest.append(vals[point] if name else None)
            cur = run_reference(layer, [cur, *rest])[0]
        if cur.shape == iota.shape and torch.equal(cur, iota):
            found.add(("identity", None))
        elif (perm := _permutation(iota, cur)) is not None:
            found.add(("transpose", tuple(perm)))
        elif torch.equal(cur.reshape(-1), iota.reshape(-1)):
            found.add(("reshape", tuple(cur.shape)))
        else:
            return None
    if len(found) != 1:
        return None             # different shapes at different points (a reshape with dynamic dims) or forms
    return next(iter(found))


def _replace(net: Network, g: Graph, run: list[Layer], form, replace: dict, drop: set, rename: dict) -> None:
    kind, arg = form
    src, dst = run[0].inputs[0], run[-1].outputs[0]
    origin = [o for x in run for o in x.origin]
    name = net.unique_name(f"{run[-1].name}/collapsed")
    if kind == "identity" and not g.is_output(dst):
        rename[dst] = src
        new = []
    elif kind == "identity":      # the name must survive: one Identity (a view, no kernel) instead of the run
        new = [Layer(name, "Identity", [src], [dst], {}, origin)]
    elif kind == "transpose":
        new = [Layer(name, "Transpose", [src], [dst], {"perm": list(arg)}, origin)]
    else:
        shape = net.add_constant(net.unique_name(f"{name}/shape"), torch.tensor(list(arg), dtype=torch.int64))
        new = [Layer(name, "Reshape", [src, shape], [dst], {"allowzero": 0}, origin)]
    replace[id(run[-1])] = new
    drop.update(id(x) for x in run[:-1])
    get_logger().verbose(f"view chain {' → '.join(x.op for x in run)} at {run[0].name!r} ⇒ {kind}"
                         f"{'' if arg is None else ' ' + str(list(arg))}")


def collapse_view_chains(net: Network, shape_points: list[dict] | None = None, max_fold_elements: int = 1 << 24,
                         **_) -> int:
    g = Graph(net, shape_points or [], max_fold_elements)
    seen: set[int] = set()
    replace: dict[int, list[Layer]] = {}
    drop: set[int] = set()
    rename: dict[str, str] = {}
    for layer in net.layers:
        if layer.op not in VIEW_OPS or id(layer) in seen or not layer.outputs or not layer.inputs:
            continue
        chain = _chain_from(g, layer)
        seen.update(id(x) for x in chain)
        i = 0
        while i < len(chain) - 1:        # the longest collapsible run from each position, left to right
            for j in range(len(chain) - 1, i, -1):
                form = _composite(g, chain[i:j + 1], max_fold_elements)
                if form is not None:
                    _replace(net, g, chain[i:j + 1], form, replace, drop, rename)
                    i = j
                    break
            i += 1
    if not replace:
        return 0
    def resolve(name):
        while name in rename:
            name = rename[name]
        return name
    kept = []
    for layer in net.layers:
        if id(layer) in drop:
            continue
        for new in replace.get(id(layer), [layer]):
            new.inputs = [resolve(i) for i in new.inputs]
            kept.append(new)
    net.layers = kept
    net.prune_tensors()
    return len(replace)
