"""Chains of layout ops (Reshape, Transpose, Squeeze, Unsqueeze, Flatten) → the one op they amount to, or nothing.

Exporters leave chains that undo themselves: the dynamo export of `scaled_dot_product_attention` folds K's
heads (Reshape to (B·H, S, D)), transposes, unfolds (Reshape to (B, H, D, S)), and the attention rule then
transposes back — four ops whose composite is the identity. Each op is a view alone, but a Reshape of a
transposed view must copy (here B·H·S·D elements per layer), and the chain hides the identity from every rule.

How: for every maximal chain (each link the only reader of the previous output) of ≥ 2 layers, the composite of
each run of links is evaluated on an index tensor (iota = 0, 1, 2, … in the input's shape) at every shape point.
When it equals iota.reshape(s).permute(p), the run becomes Reshape(s) then Transpose(p) — each dropped when it
is the identity, the reshape kept only when s is the same at every point — if that is fewer layers. Both are
views when the input is dense: ViT's q/k/v head split (Squeeze → Reshape(S, B·H, D) → Transpose → Reshape(B, H,
S, D), a copy at the first Reshape) becomes a view. Runs that are not of this form stay.
Element counts above `max_fold_elements` are not evaluated (the chain stays).
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


def _reshape_then_permute(iota: torch.Tensor, result: torch.Tensor) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(s, p) with result == iota.reshape(s).permute(p), or None.

    If such s, p exist, walking `result`'s dims in decreasing value step (the input stride each dim walks)
    gives a contiguous tensor: that order q is p's inverse and s is `result` permuted by q."""
    if result.numel() == 0:
        return None
    steps = []
    for j in range(result.dim()):
        size = result.shape[j]
        steps.append(int(result.narrow(j, 1, 1).reshape(-1)[0] - result.narrow(j, 0, 1).reshape(-1)[0])
                     if size > 1 else None)
    nonunit = [j for j in range(result.dim()) if steps[j] is not None]
    order = list(range(result.dim()))          # size-1 dims keep their places; the others sorted by step
    for pos, j in zip(nonunit, sorted(nonunit, key=lambda j: (-steps[j], j))):
        order[pos] = j
    walked = result.permute(order)
    if not torch.equal(walked.reshape(-1), iota.reshape(-1)):
        return None
    perm = tuple(sorted(range(len(order)), key=order.__getitem__))
    return tuple(walked.shape), perm


def _composite(g: Graph, chain: list[Layer], max_elements: int) -> tuple[tuple[int, ...] | None, tuple[int, ...]] | None:
    """(s, p): the chain equals Reshape(s) (None: no reshape) then Transpose(p), at every shape point; or None.
    A reshape is kept only when s is the same at every point (it becomes a constant)."""
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
        form = _reshape_then_permute(iota, cur)
        if form is None:
            return None
        shape, perm = form
        found.add((None if shape == tuple(x.shape) else shape, perm))
    return next(iter(found)) if len(found) == 1 else None


def _replace(net: Network, g: Graph, run: list[Layer], form, replace: dict, drop: set, rename: dict) -> bool:
    """Swap `run` for Reshape(s)/Transpose(p)/nothing when that is fewer layers; returns whether it did."""
    shape, perm = form
    identity_perm = perm == tuple(range(len(perm)))
    needed = (shape is not None) + (not identity_perm)
    src, dst = run[0].inputs[0], run[-1].outputs[0]
    if needed >= len(run) or (needed == 0 and g.is_output(dst) and len(run) == 1):
        return False
    origin = [o for x in run for o in x.origin]
    base = f"{run[-1].name}/collapsed"
    new: list[Layer] = []
    cur = src
    if shape is not None:
        out = dst if identity_perm else net.unique_name(f"{base}/reshaped")
        const = net.add_constant(net.unique_name(f"{base}/shape"), torch.tensor(list(shape), dtype=torch.int64))
        new.append(Layer(net.unique_name(f"{base}/reshape"), "Reshape", [cur, const], [out], {"allowzero": 0}, origin))
        cur = out
    if not identity_perm:
        new.append(Layer(net.unique_name(f"{base}/transpose"), "Transpose", [cur], [dst], {"perm": list(perm)}, origin))
    if not new:
        if g.is_output(dst):    # the name must survive: one Identity (a view, no kernel)
            new = [Layer(net.unique_name(base), "Identity", [src], [dst], {}, origin)]
        else:
            rename[dst] = src
    replace[id(run[-1])] = new
    drop.update(id(x) for x in run[:-1])
    get_logger().verbose(f"view chain {' → '.join(x.op for x in run)} at {run[0].name!r} ⇒ "
                         f"{' → '.join(x.op for x in new) or 'nothing'}")
    return True


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
                if form is not None and _replace(net, g, chain[i:j + 1], form, replace, drop, rename):
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
