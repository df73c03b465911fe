"""A per-tensor QuantizeLinear moves above the data-movement layers that feed it, so that it meets the layer
computing its input and can fuse there:

    LayerNorm ─► Transpose ─► Q ─► GEMM              ⇒   LayerNorm ─► Q ─► Transpose ─► GEMM
    Attention ─► Transpose ─► Reshape ─► Q ─► GEMM   ⇒   Attention ─► Q ─► Transpose ─► Reshape ─► GEMM

Exact: a per-tensor Q maps each element alone, q = sat(round(x / s) + z), and Reshape, Transpose, Flatten, Squeeze
and Unsqueeze only move elements, so Q(view(x)) = view(Q(x)) element for element. The moved view then carries
1-byte codes instead of 2- or 4-byte floats (a Transpose that copies moves half the bytes in float16), and the Q
reaches its producer: the LayerNorm-Q rule (qdq_producer.py), the AddLayerNorm-Q and Attention-Q rules and the
pointwise chains fold it into the kernel that computes x, so the standalone Q launch (read x, write q) goes.
ViT-B/16 INT8 had 24 such Qs behind views (LayerNorm → Transpose → Q before each QKV GEMM; attention output →
Transpose → Reshape → Q before each output projection) and BERT-base 12.
A view whose output another layer (or the network) also reads keeps the Q below it: hoisting would need the float
view as well. Runs first among the late passes (dtypes final), before the rules that absorb the Q.
Entry point: `hoist_quantize(net, shape_points=..., rejections=None) -> changes`.
"""

from ...ir import Layer, Network, TensorInfo
from ..pattern import Graph
from .base import record_rejection
from .qdq_params import quantize_params

NAME = "view → Q ⇒ Q → view (per-tensor QuantizeLinear above Reshape/Transpose/Flatten/Squeeze/Unsqueeze)"
VIEWS = ("Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze")


def _single_reader_reason(g: Graph, view: Layer) -> str | None:
    out = view.outputs[0]
    if len(view.outputs) != 1:
        return f"{view.op} with {len(view.outputs)} outputs"
    if g.is_output(out) or len(g.consumers(out)) != 1:
        return f"the {view.op} output is also read elsewhere (the float view would still be needed)"
    return None


def _view_chain(g: Graph, q: Layer) -> tuple[list[Layer], str | None]:
    """The views the Q climbs, nearest first (each read only by the next, the first only by the Q), and why it
    climbs no further — reported only when it cannot climb at all."""
    chain, t = [], q.inputs[0]
    while (view := g.producer(t)) is not None and view.op in VIEWS:
        why = _single_reader_reason(g, view)
        if why:
            return chain, None if chain else why
        chain.append(view)
        t = view.inputs[0]
    return chain, None


def hoist_quantize(net: Network, shape_points=None, rejections=None, **_) -> int:
    """Move every per-tensor QuantizeLinear above the whole run of single-reader views feeding it, in one pass:
    the Q takes the top view's place and reads its input, each view then moves the codes (fresh tensor names:
    their dtype changed) and the nearest one writes the Q's old output. Returns how many views the Qs climbed."""
    g = Graph(net, shape_points or [])
    replace: dict[int, list[Layer]] = {}       # id(old layer) → the layers in its place ([] : removed)
    climbed = 0
    for q in net.layers:
        if q.op != "QuantizeLinear":
            continue
        chain, why = _view_chain(g, q)
        if chain and why is None:
            _, why = quantize_params(g, q)
        if why:
            record_rejection(NAME, q.name, why, rejections)
        if why or not chain:
            continue
        climbed += len(chain)
        codes = net.unique_name(f"{q.outputs[0]}/codes")
        net.tensors[codes] = TensorInfo(codes)
        replace[id(q)] = []
        replace[id(chain[-1])] = [Layer(q.name, q.op, [chain[-1].inputs[0], *q.inputs[1:]], [codes], dict(q.attrs),
                                        list(q.origin), placement=q.placement, precision=q.precision)]
        for view in reversed(chain):              # from the top down, each moving the codes
            source, codes = codes, (q.outputs[0] if view is chain[0] else net.unique_name(f"{q.outputs[0]}/codes"))
            net.tensors.pop(view.outputs[0], None)
            net.tensors.setdefault(codes, TensorInfo(codes))
            replace.setdefault(id(view), []).append(
                Layer(view.name, view.op, [source, *view.inputs[1:]], [codes], dict(view.attrs), list(view.origin),
                      placement=view.placement, precision=view.precision))
    net.layers = [new for layer in net.layers for new in replace.get(id(layer), [layer])]
    return climbed
