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
from .base import record_rejection

RULE_NAME = "Add(a, b) → LayerNorm ⇒ AddLayerNormalization(a, b) → (Y, a + b)"    # also a GEMM's residual add


def _operands(g: Graph, producer: Layer | None) -> tuple[list[str] | None, str | None]:
    """The two summands of the LayerNorm's input, or (None, reason).

    An Add gives its operands. A MatMulEpilogue whose residual is added last (residual_first=0, or no activation)
    gives (its product without the residual, the residual): the GEMM then skips its residual pass and the fused
    kernel adds it while it normalises. Behind cuBLAS that pass is a separate add kernel (BERT-base b1 on an H100,
    post-norm: 12 add kernels, 14.6 µs of a 470 µs call); in a Triton epilogue it was a read of the residual,
    which the norm now does instead — never more traffic. Where the LayerNorm is the sum's only reader (BERT's
    post-norm) the fused layer does not write the sum (its second output is absent)."""
    if producer is None:
        return None, "its input is a network input or constant"
    if producer.op == "Add":
        return list(producer.inputs), None
    if producer.op == "MatMulEpilogue":
        if len(producer.inputs) < 4 or not producer.inputs[3]:
            return None, "the MatMulEpilogue adds no residual"
        a = producer.attrs
        if a.get("residual_first", 0) and a.get("activation", "none") != "none":
            return None, "the MatMulEpilogue adds its residual before the activation"
        return [producer.outputs[0], producer.inputs[3]], None
    return None, f"its input is produced by {producer.op}, not by an Add or a residual GEMM epilogue"


def _reason(g: Graph, producer: Layer | None, ln: Layer) -> str | None:
    operands, why = _operands(g, producer)
    if why:
        return why
    if len(ln.outputs) != 1 or not ln.outputs[0]:
        return "the LayerNorm also returns Mean/InvStdDev"
    if ln.attrs.get("stash_type", 1) != 1:
        return f"stash_type={ln.attrs.get('stash_type')}"
    a, b = operands
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


def _fused(g: Graph, net: Network, producer: Layer, ln: Layer) -> list[Layer]:
    """The layers replacing `producer` (the LayerNorm goes): [AddLayerNormalization] for an Add;
    [MatMulEpilogue without its residual, AddLayerNormalization] for a residual GEMM epilogue. The sum is the
    fused layer's second output where another layer or the network reads it, else absent (not written)."""
    origin = producer.origin + [o for o in ln.origin if o not in producer.origin]
    name = net.unique_name(f"{ln.name}/add_layernorm")
    total = producer.outputs[0]
    sum_out = total if len(g.consumers(total)) > 1 or g.is_output(total) else ""
    if producer.op == "Add":
        return [Layer(name, "AddLayerNormalization", [*producer.inputs, *ln.inputs[1:]],
                      [ln.outputs[0], sum_out], dict(ln.attrs), origin)]
    product = net.unique_name(f"{producer.name}/product")
    net.tensors[product] = TensorInfo(product)
    gemm = Layer(producer.name, producer.op, producer.inputs[:3], [product], dict(producer.attrs),
                 list(producer.origin), precision=producer.precision)
    return [gemm, Layer(name, "AddLayerNormalization", [product, producer.inputs[3], *ln.inputs[1:]],
                        [ln.outputs[0], sum_out], dict(ln.attrs), origin)]


def fuse_add_layernorm(net: Network, shape_points: list[dict] | None = None, max_fold_elements: int = 1 << 24,
                       rejections: list | None = None, **_) -> int:
    """Replace every (Add or residual MatMulEpilogue → LayerNormalization over the last axis) by an
    AddLayerNormalization at the producer's position, outputs [Y, sum]; other readers of the sum read the fused
    layer's second output (absent when nothing else reads it)."""
    g = Graph(net, shape_points or [], max_fold_elements)
    position = {id(layer): i for i, layer in enumerate(net.layers)}
    replace: dict[int, list[Layer]] = {}
    drop: set[int] = set()
    log = get_logger()
    for ln in net.layers:
        if ln.op != "LayerNormalization":
            continue
        producer = g.producer(ln.inputs[0])
        why = _reason(g, producer, ln)
        if why is None and id(producer) in replace:
            why = "the sum already feeds another fused LayerNorm"
        if why is None:    # the fused layer sits where the producer was: γ and β must exist by then
            late = [i for i in ln.inputs[1:] if i and g.producer(i) is not None
                    and position[id(g.producer(i))] > position[id(producer)]]
            why = f"{late[0]!r} is computed after the sum" if late else None
        if why:
            record_rejection(RULE_NAME, ln.name, why, rejections)
            continue
        replace[id(producer)] = _fused(g, net, producer, ln)
        drop.add(id(ln))
    if not replace:
        return 0
    net.layers = [new for layer in net.layers if id(layer) not in drop for new in replace.get(id(layer), [layer])]
    for layers in replace.values():
        for o in (o for layer in layers for o in layer.outputs if o):
            net.tensors.setdefault(o, TensorInfo(o))
    log.verbose(f"rule {RULE_NAME}: applied {len(replace)} time(s)")
    return len(replace)
