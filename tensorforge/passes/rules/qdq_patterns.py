"""Pattern pieces the Q/DQ fusion rules share (qdq.py, qdq_epilogue.py, qdq_int4.py): the activations a quantized
epilogue takes, a QuantizeLinear with or without its zero point, and reading the matched activation back.

    activations_of(z)  = Relu(z) | Sigmoid(z) | … | Clip(z, lo[, hi]) | z · Sigmoid(z)
    quantize_of(inner) = QuantizeLinear(inner, s[, z])

Kept apart so that the rules import it and not each other.
"""

from ..pattern import AnyOf, Const, Op
from .epilogue import _activation

ACTIVATION_OPS = ("Relu", "Sigmoid", "Tanh", "LeakyRelu", "Elu", "HardSigmoid", "HardSwish", "Gelu")


def quantize_of(inner, name):
    """QuantizeLinear(inner, s[, z]) bound as `name` (its scale and zero point as name_s, name_z)."""
    return AnyOf(Op("QuantizeLinear", inner, Const(name=name + "_s"), Const(name=name + "_z"), name=name),
                 Op("QuantizeLinear", inner, Const(name=name + "_s"), name=name))


def activations_of(z, name):
    """The activations of z an epilogue takes, each bound as `name` (Clip's bounds as name_lo, name_hi)."""
    return [Op(a, z, name=name) for a in ACTIVATION_OPS] + [
        Op("Clip", z, Const(name=name + "_lo"), Const(name=name + "_hi"), name=name),
        Op("Clip", z, Const(name=name + "_lo"), name=name), Op("Mul", z, Op("Sigmoid", z), name=name)]


def activation_of(m, key) -> tuple[str, float, float]:
    """(activation, alpha, beta) of the layer matched as `key` ("none" when absent)."""
    layer = m.get(key)
    if layer is not None and layer.op == "Clip":       # epilogue._activation reads clip_lo/clip_hi
        lo = float(m[key + "_lo.value"].reshape(-1)[0])
        hi = float(m[key + "_hi.value"].reshape(-1)[0]) if key + "_hi" in m.binds else float("inf")
        return "Clip", lo, hi
    return _activation(layer, m)
