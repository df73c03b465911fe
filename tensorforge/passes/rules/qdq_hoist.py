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
MAX_ROUNDS = 16            # a Q climbs one view per round; longer view runs than this are unheard of


def _reason(g: Graph, view: Layer, q: Layer) -> str | None:
    out = view.outputs[0]
    if g.is_output(out) or len(g.consumers(out)) != 1:
        return f"the {view.op} output is also read elsewhere (the float view would still be needed)"
    if len(view.outputs) != 1:
        return f"{view.op} with {len(view.outputs)} outputs"
    _, why = quantize_params(g, q)
    return why


def _hoist_once(net: Network, shape_points, reasons: dict) -> int:
    g = Graph(net, shape_points or [])
    reasons.clear()
    swap: dict[int, Layer] = {}            # id(old layer) → its replacement, in the old layer's position
    for q in net.layers:
        if q.op != "QuantizeLinear" or id(q) in swap:
            continue
        view = g.producer(q.inputs[0])
        if view is None or view.op not in VIEWS or id(view) in swap:
            continue
        why = _reason(g, view, q)
        if why:
            reasons[q.name] = why
            continue
        codes = net.unique_name(f"{q.outputs[0]}/before_{view.op.lower()}")
        net.tensors[codes] = TensorInfo(codes)
        moved_q = Layer(q.name, q.op, [view.inputs[0], *q.inputs[1:]], [codes], dict(q.attrs), list(q.origin),
                        placement=q.placement, precision=q.precision)
        moved_view = Layer(view.name, view.op, [codes, *view.inputs[1:]], list(q.outputs), dict(view.attrs),
                           list(view.origin), placement=view.placement, precision=view.precision)
        swap[id(view)], swap[id(q)] = moved_q, moved_view
        net.tensors.pop(view.outputs[0], None)
    net.layers = [swap.get(id(layer), layer) for layer in net.layers]
    return len(swap) // 2


def hoist_quantize(net: Network, shape_points=None, rejections=None, **_) -> int:
    """Move every per-tensor QuantizeLinear above the chain of single-reader views feeding it; returns how many
    view/Q swaps were made."""
    total, reasons = 0, {}
    for _ in range(MAX_ROUNDS):
        changed = _hoist_once(net, shape_points, reasons)
        total += changed
        if not changed:
            break
    for name, why in reasons.items():          # the last round's: the Qs that stay below a view, once each
        record_rejection(NAME, name, why, rejections)
    return total
