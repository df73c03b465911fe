"""Residual Add + LayerNorm → one AddLayerNormalization layer that also returns the sum.

Pre-norm transformers (GPT-2, ViT) keep a residual stream h: `h = h + attn(LN(h)); h = h + mlp(LN(h))`. The
Add's output is read twice — by the LayerNorm and by the next residual Add — so the pattern rules (which fuse
only when intermediates stay inside the match) leave it as two kernels. Fused, one kernel reads both operands
once and writes the sum and the normalised rows (4·|h| traffic instead of 5·|h|, one launch instead of two);
it also reads strided operands (ViT's residual arrives transposed) without a copy first.
Runs after precision conversion (LATE_PASSES): the Add and the LayerNorm then have their final dtypes.
"""

from ...ir import Layer, Network, TensorInfo
from ...util.log import get_logger
from ..pattern import Graph
from .base import Rejection

RULE_NAME = "Add(a, b) → LayerNorm ⇒ AddLayerNormalization(a, b) → (Y, a + b)"


def _reason(g: Graph, add: Layer | None, ln: Layer) -> str | None:
    if add is None or add.op != "Add":
        return "its input is not produced by an Add"
    if len(ln.outputs) != 1 or not ln.outputs[0]:
        return "the LayerNorm also returns Mean/InvStdDev"
    if ln.attrs.get("stash_type", 1) != 1:
        return f"stash_type={ln.attrs.get('stash_type')}"
    a, b = add.inputs
    if g.constant(a) is not None or g.constant(b) is not None:
        return "an Add operand is a constant (a bias, not a residual)"
    x = ln.inputs[0]
    rank = g.rank(x)
    if rank is None or not (g.same_shape(a, x) and g.same_shape(b, x)):
        return "the Add broadcasts (its operands and the sum differ in shape) or shapes are unknown"
    if int(ln.attrs.get("axis", -1)) % rank != rank - 1:
        return f"the LayerNorm normalises from axis {ln.attrs.get('axis')}, not over the last axis only"
    dt = g.dtype(x)
    if dt is None or not dt.is_floating_point or g.dtype(a) != dt or g.dtype(b) != dt:
        return "operands are not all of one floating dtype"
    return None


def fuse_add_layernorm(net: Network, shape_points: list[dict] | None = None, max_fold_elements: int = 1 << 24,
                       rejections: list | None = None, **_) -> int:
    """Replace every (Add → LayerNormalization over the last axis) by one AddLayerNormalization at the Add's
    position, outputs [Y, sum]; other readers of the sum read the fused layer's second output."""
    g = Graph(net, shape_points or [], max_fold_elements)
    position = {id(layer): i for i, layer in enumerate(net.layers)}
    replace: dict[int, Layer] = {}
    drop: set[int] = set()
    log = get_logger()
    for ln in net.layers:
        if ln.op != "LayerNormalization":
            continue
        add = g.producer(ln.inputs[0])
        why = _reason(g, add, ln)
        if why is None and id(add) in replace:
            why = "the Add already feeds another fused LayerNorm"
        if why is None:    # the fused layer sits where the Add was: γ and β must exist by then
            late = [i for i in ln.inputs[1:] if i and g.producer(i) is not None
                    and position[id(g.producer(i))] > position[id(add)]]
            why = f"{late[0]!r} is computed after the Add" if late else None
        if why:
            rej = Rejection(RULE_NAME, ln.name, why)
            log.verbose(str(rej))
            if rejections is not None:
                rejections.append(rej)
            continue
        fused = Layer(net.unique_name(f"{ln.name}/add_layernorm"), "AddLayerNormalization",
                      [*add.inputs, *ln.inputs[1:]], [ln.outputs[0], add.outputs[0]], dict(ln.attrs),
                      add.origin + [o for o in ln.origin if o not in add.origin])
        replace[id(add)] = fused
        drop.add(id(ln))
    if not replace:
        return 0
    net.layers = [replace.get(id(layer), layer) for layer in net.layers if id(layer) not in drop]
    for layer in replace.values():
        for o in layer.outputs:
            net.tensors.setdefault(o, TensorInfo(o))
    log.verbose(f"rule {RULE_NAME}: applied {len(replace)} time(s)")
    return len(replace)
