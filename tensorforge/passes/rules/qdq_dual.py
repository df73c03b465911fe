"""The next layer's Q as a second output: a quantized op with a float output y that is read both by a
QuantizeLinear and by float layers gets `out2 = Q(y)` in its epilogue, and the QuantizeLinear layer goes.

Exporters: implicit INT8 (builder/calibration/qdq_insert.py) and ModelOpt put the Q at the next convolution's
input, while the residual Add of the next block reads the same tensor in float (ResNet's block outputs):

    ─► QuantizedConv ─► y ─┬─► Q(s, z) ─► DQ ─► next conv        ⇒     ─► QuantizedConv ─┬─► y ─► Add
                           └─► Add (float)                                    (y, Q(y)) └─► Q(y) ─► DQ ─► …

Saves one read of y and one launch per such tensor. Runs after fuse-qdq (passes/rules/qdq.py). Entry point:
`fuse_output_quantize(net, shape_points=..., rejections=None) -> changes`.
"""

from ..pattern import Graph
from .base import record_rejection
from .qdq_params import quantize_params

FUSED = ("QuantizedConv", "QuantizedConvTranspose", "QuantizedMatMul")
NAME = "Q(y) beside y ⇒ second output of the quantized op"


def fuse_output_quantize(net, shape_points=None, rejections=None, **_) -> int:
    g = Graph(net, shape_points)
    users = net.consumers()
    drop: set[int] = set()
    changes = 0
    for layer in net.layers:
        if layer.op not in FUSED or layer.attrs.get("y_scale") or layer.attrs.get("out2_scale") \
                or len(layer.outputs) != 1:
            continue
        qs = [u for u in users.get(layer.outputs[0], []) if u.op == "QuantizeLinear" and u.inputs[0] == layer.outputs[0]]
        if not qs:
            continue
        params, why = quantize_params(g, qs[0])
        if why:
            record_rejection(NAME, qs[0].name, why, rejections)
            continue
        layer.attrs.update(out2_scale=params["scale"], out2_zero_point=params["zero_point"],
                           out2_dtype=params["dtype"])
        layer.outputs.append(qs[0].outputs[0])
        layer.origin += [o for o in qs[0].origin if o not in layer.origin]
        drop.add(id(qs[0]))
        changes += 1
    net.layers = [la for la in net.layers if id(la) not in drop]
    return changes
