"""MaxPool on quantized codes: Q(MaxPool(y)) = MaxPool(Q(y)), exactly, because QuantizeLinear is monotone
non-decreasing (round-half-even of y/s, + z, saturate), and −∞ padding quantizes to the type's minimum, which is
what the int8 MaxPool pads with. Two forms, both leaving MaxPool with an int8/uint8 input and output:

  implicit INT8 (calibrated):   Quantized*(…) ─► y (float) ─► MaxPool ─► Q(s, z) ─► q
                            ⇒   Quantized*(…; Q(s, z) in its epilogue) ─► y_q ─► MaxPool ─► q
  explicit Q/DQ (onnxruntime):  q₀ ─► DQ(s, z) ─► MaxPool ─► Q(s, z) ─► q      (the same s, z, type)
                            ⇒   q₀ ─► MaxPool ─► q                           (the DQ stays for other readers)

A float y read by anything else, or a network output, keeps its float MaxPool (the reason goes to the
rejections). Saves the float write and read of y, the float pool and the standalone Q launch. Entry point:
`quantize_before_maxpool(net, shape_points=..., rejections=None) -> changes` (run by fuse-qdq-epilogue).
"""

from ...ir import TensorInfo
from ..pattern import Graph
from .base import record_rejection
from .qdq_params import QUANT_TYPES, dequant, quantize_params

NAME = "Q(MaxPool(y)) ⇒ MaxPool(Q(y)) on int8 codes"
QUANTIZED = ("QuantizedConv", "QuantizedConvTranspose", "QuantizedMatMul")
_TYPES = {"int8", "uint8"}


def _producer_reason(p, y, users, net) -> str | None:
    if p is None or p.op not in QUANTIZED:
        return f"{y!r} is not written by a quantized op ({p.op if p else 'an input or constant'})"
    if p.attrs.get("y_scale") or p.attrs.get("out2_scale") or len(p.outputs) != 1:
        return f"{p.name!r} already writes a quantized output"
    if len(users.get(y, [])) != 1 or y in net.outputs:
        return f"{y!r} has readers besides the MaxPool: it stays float"
    return None


def _dq_form(g, pool, q, params):
    """The explicit form: the pool reads DQ(q₀) with exactly the Q's scale, zero point and type."""
    d, why = dequant(g, pool.inputs[0])
    if why:
        return None, why
    zp = 0 if d.zero_point is None else int(d.zero_point.reshape(-1)[0])
    if d.scale.numel() != 1 or (params["scale"], params["zero_point"], params["dtype"]) != \
            (float(d.scale[0]), zp, QUANT_TYPES.get(d.dtype)):
        return None, f"DQ {d.layer_name!r} and Q {q.name!r} do not use the same scale, zero point and type"
    return d.source, None


def quantize_before_maxpool(net, shape_points=None, rejections=None, **_) -> int:
    g = Graph(net, shape_points)
    users = net.consumers()
    producers = net.producers()
    drop: set[int] = set()
    changes = 0
    for q in list(net.layers):
        if q.op != "QuantizeLinear":
            continue
        pool = producers.get(q.inputs[0])
        if pool is None or pool.op != "MaxPool" or len(pool.outputs) != 1:
            continue
        params, why = quantize_params(g, q)
        if not why and params["dtype"] not in _TYPES:
            why = f"{params['dtype']} codes: the int8 MaxPool takes int8/uint8"
        if not why and (len(users.get(pool.outputs[0], [])) != 1 or pool.outputs[0] in net.outputs):
            why = f"MaxPool {pool.name!r} has readers besides the Q: its float output stays"
        if why:
            record_rejection(NAME, q.name, why, rejections)
            continue
        x = pool.inputs[0]
        codes, dq_why = _dq_form(g, pool, q, params)
        if codes is None:
            p = producers.get(x)
            why = _producer_reason(p, x, users, net)
            if why:
                record_rejection(NAME, q.name, f"{dq_why}; and {why}" if p and p.op == "DequantizeLinear" else why,
                                 rejections)
                continue
            codes = net.unique_name(f"{x}/quantized")
            net.tensors[codes] = TensorInfo(codes, net.tensors[q.outputs[0]].dtype, net.tensors[x].shape
                                            if x in net.tensors else None)
            p.attrs.update(y_scale=params["scale"], y_zero_point=params["zero_point"], y_dtype=params["dtype"])
            p.outputs[0] = codes
            p.origin += [o for o in q.origin if o not in p.origin]
        pool.inputs[0] = codes
        pool.outputs[0] = q.outputs[0]
        pool.origin += [o for o in q.origin if o not in pool.origin]
        drop.add(id(q))
        changes += 1
        users = net.consumers()
        producers = net.producers()
    if changes:
        net.layers = [la for la in net.layers if id(la) not in drop]
        net.prune_tensors()
    return changes


__all__ = ["quantize_before_maxpool"]
