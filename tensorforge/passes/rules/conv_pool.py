"""FusedConv → GlobalAveragePool ⇒ FusedConvPool: the convolution's epilogue also averages its output.

Squeeze-excite blocks (MobileNetV3, EfficientNet) pool the output of their depthwise convolution, and
classification networks pool their last feature map. Unfused, the epilogue writes Y and a separate reduction
kernel reads all of Y back to average it. Fused, one pass adds bias/activation/residual, writes Y (when anything
else reads it) and sums it per channel: one launch and one read of Y fewer. When the pool is Y's only reader
(the last feature map), the fused layer's Y output is absent and Y is never written.
Runs after precision conversion (LATE_PASSES), so the fused layer takes the convolution's final precision.
"""

from ...ir import Layer, Network
from ..pattern import Graph
from .base import record_rejection, splice_layers

RULE_NAME = "FusedConv → GlobalAveragePool ⇒ FusedConvPool → (Y, mean of Y)"


def _reason(g: Graph, conv: Layer | None, pool: Layer) -> str | None:
    if conv is None or conv.op != "FusedConv":
        return f"its input is produced by {conv.op if conv else 'no layer'}, not by a FusedConv"
    y = conv.outputs[0]
    if g.rank(y) != 4:
        return "the convolution is not 2-D (or its output rank is unknown)"
    dt = g.dtype(y)
    if dt is None or not dt.is_floating_point:
        return "the convolution output is not floating point"
    return None


def fuse_conv_pool(net: Network, shape_points: list[dict] | None = None, max_fold_elements: int = 1 << 24,
                   rejections: list | None = None, **_) -> int:
    """Replace each (FusedConv → GlobalAveragePool) by one FusedConvPool at the convolution's position, outputs
    [Y, pooled]; Y becomes absent ("") when the pool was its only reader and it is not a network output."""
    g = Graph(net, shape_points or [], max_fold_elements)
    replace: dict[int, Layer] = {}
    drop: set[int] = set()
    for pool in net.layers:
        if pool.op != "GlobalAveragePool":
            continue
        conv = g.producer(pool.inputs[0])
        why = _reason(g, conv, pool)
        if why is None and id(conv) in replace:
            why = "the convolution output is already pooled by another fused layer"
        if why:
            record_rejection(RULE_NAME, pool.name, why, rejections)
            continue
        y = conv.outputs[0]
        y_read = len(g.consumers(y)) > 1 or g.is_output(y)
        origin = conv.origin + [o for o in pool.origin if o not in conv.origin]
        replace[id(conv)] = Layer(net.unique_name(f"{conv.name}/pool"), "FusedConvPool", list(conv.inputs),
                                  [y if y_read else "", pool.outputs[0]], dict(conv.attrs), origin,
                                  precision=conv.precision)
        drop.add(id(pool))
    return splice_layers(net, replace, drop, RULE_NAME)
