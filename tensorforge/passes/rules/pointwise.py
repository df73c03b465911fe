"""Pointwise grouping: connected elementwise/broadcast layers of one iteration shape → one PointwiseChain.

    x ─► Div(√2) ─► Erf ─► … ─► Mul ─► y        ⇒     x ─► PointwiseChain[steps…] ─► y
             (after the rules: Gelu ─► Gelu)              one generated kernel (codegen/)

Runs after precision conversion (pipeline LATE_PASSES), so dtypes are final. A layer joins a group when
its op is in `ir.ops.fused.POINTWISE_OPS` (with `pointwise_reason` None), it runs on the device (its
output is not a known value), and its output has the group's iteration shape at every shape point;
smaller operands (bias vectors, scalars) are broadcast inputs. Single-element constants become literals
in the program. Two groups merge only if no path leaves the merged group and comes back into it (the
chain must run as one step). A member read outside the group is an extra chain output. Each chain of ≥ 2
layers saves one write and one read of every intermediate: 2·bytes(t) per fused edge. A lone layer that
broadcasts a computed tensor (x · s[n, c]) is a chain too: the generated kernel is vectorised where torch's
broadcast kernel is not. A per-tensor QuantizeLinear (constant scale and zero point, int8/uint8 out) joins the
chain that computes its input, so an implicit-INT8 network's float producer writes int8 codes (1 byte per element)
instead of a float tensor that a standalone Q kernel reads back (squeeze-excite's gate · x → Q: 3 bytes per element
saved in float16, plus a launch).
Cost: union–find over the layers plus a bounded search per merge.
"""

import torch

from ...ir import Layer, Network, dtype_name, get_spec
from ...ir.ops.fused import CHAIN_DTYPES, POINTWISE_OPS, pointwise_reason
from ..pattern import Graph
from .base import record_rejection

MAX_INPUTS, MAX_OUTPUTS = 12, 6


def _literal_exponent(g: Graph, layer: Layer):
    if layer.op != "Pow" or len(layer.inputs) < 2:
        return None
    c = g.constant(layer.inputs[1])
    return float(c.reshape(-1)[0]) if c is not None and c.numel() == 1 and c.dtype.is_floating_point else None


def _candidate(g: Graph, layer: Layer) -> str | None:
    """None if `layer` may join a chain; else why not (only reported for elementwise ops)."""
    ins = [g.dtype(i) if i else None for i in layer.inputs]
    why = pointwise_reason(layer.op, ins, _literal_exponent(g, layer))
    if why:
        return why
    if len(layer.outputs) != 1:
        return f"{layer.op} with {len(layer.outputs)} outputs"
    vals = g.values(layer.outputs[0])
    if vals is None:
        return "its output shape is unknown at build time"
    if all(v.device.type != "meta" for v in vals):
        return "it is shape arithmetic on known values (runs on the host)"
    if vals[0].dtype not in CHAIN_DTYPES:
        return f"output dtype {vals[0].dtype} is not supported in generated kernels"
    if layer.op == "QuantizeLinear":
        return _quantize_reason(g, layer, vals[0].dtype)
    return None


def _quantize_reason(g: Graph, layer: Layer, out_dtype) -> str | None:
    """A QuantizeLinear joins a chain (the producer's last step: the chain writes int8 codes instead of a float
    tensor that a standalone Q reads back) only in the form codegen writes: per tensor, float32 scale and
    int8/uint8 zero point as constants, int8/uint8 out."""
    a = layer.attrs
    scale = g.constant(layer.inputs[1]) if len(layer.inputs) > 1 and layer.inputs[1] else None
    zp = g.constant(layer.inputs[2]) if len(layer.inputs) > 2 and layer.inputs[2] else None
    if scale is None or scale.numel() != 1 or scale.dtype != torch.float32:
        return "QuantizeLinear with a per-axis, computed or non-float32 scale (a chain takes one float32 constant)"
    if len(layer.inputs) > 2 and layer.inputs[2] and (zp is None or zp.numel() != 1):
        return "QuantizeLinear with a per-axis or computed zero point"
    if out_dtype not in (torch.int8, torch.uint8) or a.get("block_size") or a.get("precision") not in (None, "float32"):
        return f"QuantizeLinear to {out_dtype} (blocked or in another precision): chains generate int8/uint8 only"
    return None


class _Groups:
    def __init__(self):
        self.parent: dict[int, int] = {}

    def find(self, i: int) -> int:
        while self.parent.get(i, i) != i:
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)


def _creates_cycle(net: Network, index: dict[int, int], members: set[int], g: Graph) -> bool:
    """True if some path leaves `members` (layer indices) through a non-member and re-enters. Paths only
    go forward in the topological order, so the search stops past the last member."""
    hi = max(members)
    stack = [c for m in members for o in net.layers[m].outputs for c in g.consumers(o) if index[id(c)] not in members]
    seen: set[int] = set()
    while stack:
        layer = stack.pop()
        i = index[id(layer)]
        if i in seen or i > hi:
            continue
        seen.add(i)
        for o in layer.outputs:
            for c in g.consumers(o):
                if index[id(c)] in members:
                    return True
                stack.append(c)
    return False


def _stable_toposort(layers: list[Layer], available: set[str]) -> list[Layer]:
    """Layers in dependency order, keeping the given order wherever it is already valid."""
    pending, out = list(layers), []
    ready = set(available)
    while pending:
        for k, layer in enumerate(pending):
            if all(not i or i in ready for i in layer.inputs):
                out.append(layer)
                ready.update(layer.outputs)
                del pending[k]
                break
        else:
            raise RuntimeError(f"pointwise grouping left a cycle at {pending[0].name!r}")
    return out


def _io(net: Network, members: list[int], g: Graph) -> tuple[list[str], list[str]]:
    inside = {o for m in members for o in net.layers[m].outputs}
    ins, outs = [], []
    for m in members:
        layer = net.layers[m]
        for i in layer.inputs:
            c = g.constant(i)
            if i and i not in inside and i not in ins and not (c is not None and c.numel() == 1):
                ins.append(i)
        member_ids = {id(net.layers[k]) for k in members}
        for o in layer.outputs:
            if g.is_output(o) or any(id(c) not in member_ids for c in g.consumers(o)):
                outs.append(o)
    return ins, outs


def _chain_layer(net: Network, members: list[int], g: Graph) -> Layer:
    ins, outs = _io(net, members, g)
    refs = {name: f"in{k}" for k, name in enumerate(ins)}
    consts, steps = [], []
    for m in members:
        layer = net.layers[m]
        args = []
        for i in layer.inputs:
            if not i:
                args.append("")
                continue
            if i not in refs:      # a single-element constant: a literal of the program
                c = g.constant(i)
                consts.append({"value": c.reshape(-1)[0].item(), "dtype": dtype_name(c.dtype), "shape": list(c.shape)})
                refs[i] = f"c{len(consts) - 1}"
            args.append(refs[i])
        attrs = get_spec(layer.op).resolve_attrs(layer.attrs)
        steps.append({"op": layer.op, "args": args, "attrs": attrs})
        refs[layer.outputs[0]] = f"s{len(steps) - 1}"
    origin = []
    for m in members:
        origin += [o for o in net.layers[m].origin if o not in origin]
    last = net.layers[members[-1]]
    attrs = {"steps": steps, "consts": consts, "outputs": [refs[o] for o in outs],
             "out_dtypes": [dtype_name(g.dtype(o)) for o in outs]}
    return Layer(net.unique_name(f"{last.name}/chain"), "PointwiseChain", ins, outs, attrs, origin)


def _broadcasts(g: Graph, layer: Layer) -> bool:
    """A lone layer still becomes a chain when it broadcasts a tensor operand (squeeze-excite's x · s[n, c], a
    per-channel scale): torch runs such ops through its generic strided kernel, the generated one vectorises."""
    out = g.shape(layer.outputs[0])
    if out is None:
        return False
    for i in layer.inputs:
        shape = g.shape(i) if i else None
        if shape is not None and shape != out and g.constant(i) is None and 1 < _numel(shape):
            return True
    return False


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= max(d, 0)
    return n


def group_pointwise_chains(net: Network, shape_points: list[dict] | None = None, rejections: list | None = None,
                           max_fold_elements: int = 1 << 24, **_) -> int:
    g = Graph(net, shape_points or [], max_fold_elements)
    index = {id(layer): k for k, layer in enumerate(net.layers)}
    ok: set[int] = set()
    for k, layer in enumerate(net.layers):
        why = _candidate(g, layer)
        if why is None:
            ok.add(k)
        elif layer.op in POINTWISE_OPS and "host" not in why:
            record_rejection("pointwise chain", layer.name, why, rejections)
    groups = _Groups()
    members_of: dict[int, set[int]] = {k: {k} for k in ok}
    for k in sorted(ok):
        layer = net.layers[k]
        for i in layer.inputs:
            p = g.producer(i) if i else None
            if p is None or index[id(p)] not in ok:
                continue
            a, b = groups.find(index[id(p)]), groups.find(k)
            if a == b or not g.same_shape(p.outputs[0], layer.outputs[0]):
                continue
            merged = members_of[a] | members_of[b]
            ins, outs = _io(net, sorted(merged), g)
            if len(ins) > MAX_INPUTS or len(outs) > MAX_OUTPUTS or _creates_cycle(net, index, merged, g):
                continue
            groups.union(a, b)
            root = groups.find(b)
            members_of[root] = merged
    chains: dict[int, Layer] = {}
    drop: set[int] = set()
    for root, members in members_of.items():
        if groups.find(root) != root or (len(members) < 2 and not _broadcasts(g, net.layers[root])):
            continue
        order = sorted(members)
        chains[order[-1]] = _chain_layer(net, order, g)
        drop.update(order)
    # a chain sits where its last member was; a reader of an earlier member moves after it
    layers = [chains[k] if k in chains else layer for k, layer in enumerate(net.layers) if k in chains or k not in drop]
    net.layers = _stable_toposort(layers, set(net.inputs) | set(net.constants))
    net.prune_tensors()
    return len(chains)
