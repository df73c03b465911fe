"""The next layer's Q as a second output: a quantized op with a float output y that is read both by a
QuantizeLinear and by float layers gets `out2 = Q(y)` in its epilogue, and the QuantizeLinear layer goes.

Exporters: implicit INT8 (builder/calibration/qdq_insert.py) and ModelOpt put the Q at the next convolution's
input, while the residual Add of the next block reads the same tensor in float (ResNet's block outputs):

    ─► QuantizedConv ─► y ─┬─► Q(s, z) ─► DQ ─► next conv        ⇒     ─► QuantizedConv ─┬─► y ─► Add
                           └─► Add (float)                                    (y, Q(y)) └─► Q(y) ─► DQ ─► …

Saves one read of y and one launch per such tensor. Runs after fuse-qdq (passes/rules/qdq.py). Entry point:
`fuse_output_quantize(net, shape_points=..., rejections=None) -> changes`.

Implicit quantization only (the builder inserted the Q/DQ layers from calibrated ranges: `net.implicit_quantization`,
set by builder/calibration/quantize.py), as TensorRT's implicit INT8 runs a residual Add on int8 inputs: a float
residual y that has its Q(y) beside it is read as those codes, DQ(Q(y)) (error ≤ half of y's calibrated step),
and once no float reader is left the producer writes only Q(y) — int8 in, int8 out:

    ─► P ─┬─► y ─► C(…, residual y)        ⇒     ─► P ─► Q(y) ─┬─► DQ ─► next conv
          └─► Q(y) ─► DQ ─► next conv                          └─► C(…, residual Q(y): s, z)
An explicit Q/DQ graph keeps its float residual exactly as written.
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
    if getattr(net, "implicit_quantization", None):
        changes += residuals_from_codes(net, rejections)
    return changes


RES_NAME = "float residual y beside Q(y) ⇒ quantized residual Q(y) (implicit quantization)"


def residuals_from_codes(net, rejections=None) -> int:
    """Quantized readers of a float residual y written with its Q(y) as second output read Q(y) instead; a producer
    whose y is then unread writes Q(y) only. Returns the number of residuals moved."""
    producers = net.producers()
    changes = 0
    for layer in net.layers:
        if layer.op not in FUSED or len(layer.inputs) < 4 or not layer.inputs[3] or layer.attrs.get("residual_scale"):
            continue
        p = producers.get(layer.inputs[3])
        if p is None or p.op not in FUSED or len(p.outputs) != 2 or p.outputs[0] != layer.inputs[3]:
            record_rejection(RES_NAME, layer.name, f"the residual {layer.inputs[3]!r} has no Q beside it", rejections)
            continue
        if p.attrs.get("out2_dtype") not in ("int8", "uint8"):
            record_rejection(RES_NAME, layer.name, f"Q({layer.inputs[3]}) is {p.attrs.get('out2_dtype')}: "
                             "residuals are read as int8/uint8 codes only", rejections)
            continue
        layer.inputs[3] = p.outputs[1]
        layer.attrs.update(residual_scale=p.attrs["out2_scale"], residual_zero_point=p.attrs["out2_zero_point"])
        changes += 1
    users = net.consumers()
    for p in net.layers:
        if p.op in FUSED and len(p.outputs) == 2 and not users.get(p.outputs[0]) and p.outputs[0] not in net.outputs:
            a = p.attrs
            a.update(y_scale=a["out2_scale"], y_zero_point=a["out2_zero_point"], y_dtype=a["out2_dtype"],
                     out2_scale=0.0, out2_zero_point=0, out2_dtype="")
            p.outputs = [p.outputs[1]]
    net.prune_tensors()
    return changes
