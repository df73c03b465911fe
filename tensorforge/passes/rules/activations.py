"""HardSwish, HardSigmoid and Mish written out by exporters → one activation layer (ir/ops/activation.py).

Exporters that decompose them: paddle2onnx writes hard_swish as Add(x, 3)/Clip(0, 6)/Div(6)/Mul(x) (or
Mul(1/6)); tf2onnx writes Keras' hard_sigmoid as Clip(Mul(x, α) + β, 0, 1) and tf.nn.relu6(x+3)/6 in
MobileNetV3 as Clip/Div; torch.onnx.export below opset 14 writes nn.Hardswish as HardSigmoid(x, 1/6, ½)·x;
YOLOv4/v5 exports write Mish as x·tanh(softplus(x)) or x·tanh(log(1 + exp(x))). Fused, each is one read and
one write per element instead of two tensors per op (and the conv epilogue rule can then absorb it).
SiLU (x·σ(x)) is left as Sigmoid·Mul on purpose: the conv/GEMM epilogue rule already takes that form, and
standalone it joins a PointwiseChain (Swish is not a chain op).
"""

from ..pattern import AnyOf, Const, Op, Product, Sum, Var
from .base import Rule


def _floating(g, name):
    dt = g.dtype(name)
    return None if dt is not None and dt.is_floating_point else f"needs a floating-point input, found {dt}"


def _same_shape(m, g):
    x, y = m["x"], m.root.outputs[0]
    if not g.same_shape(x, y):
        return (f"the constants change the shape ({g.shape(x)} → {g.shape(y)}): the activation would not "
                "broadcast them" if g.values(x) is not None else f"shapes are unknown ({g.shape_error})")
    return None


def _near(value: float, default: float, tol: float = 1e-5):
    return lambda v: abs((default if v is None else float(v)) - value) <= tol


_x = Var("x", _floating)
# relu6(x + 3) as Clip(x + 3, 0, 6)
_clip6 = Op("Clip", Sum(_x, Const(3.0)), Const(0.0), Const(6.0))
# clip(x + 3, 0, 6) / 6, or · 1/6, or torch's HardSigmoid(x, α=1/6, β=½)
_hsig = AnyOf(Op("Div", _clip6, Const(6.0)), Product(_clip6, Const(1 / 6)),
              Op("HardSigmoid", _x, attrs={"alpha": _near(1 / 6, 0.2), "beta": _near(0.5, 0.5)}))


class HardSwishRule(Rule):
    """x·clip(x + 3, 0, 6)/6 in the exporters' association orders ⇒ HardSwish(x):

        x ─► Add(·, 3) ─► Clip(0, 6) ─► Div(·, 6) ─► Mul(x, ·) ─► y           (paddle2onnx, tf2onnx)
        x ─► Add(·, 3) ─► Clip(0, 6) ─► Mul(x, ·) ─► Div(·, 6) | Mul(·, 1/6)  (paddle2onnx's other order)
        x ─► HardSigmoid(1/6, ½) ─► Mul(x, ·) ─► y                            (torch.onnx.export, opset < 14)
    """

    name = "x·clip(x+3,0,6)/6 ⇒ HardSwish(x)"
    anchor = {"Clip", "HardSigmoid"}
    pattern = AnyOf(Product(_x, _hsig), Product(_x, _clip6, Const(1 / 6)), Op("Div", Product(_x, _clip6), Const(6.0)))

    def check(self, m, g):
        return _same_shape(m, g)

    def rewrite(self, m, g):
        return [self.new_layer(g, m, "HardSwish", [m["x"]])]


class HardSigmoidRule(Rule):
    """clip(α·x + β, 0, 1) and clip(x + 3, 0, 6)/6 ⇒ HardSigmoid(x, α, β):

        x ─► Mul(·, α) ─► Add(·, β) ─► Clip(0, 1) ─► y       (tf2onnx: Keras hard_sigmoid, α = 0.2, β = ½)
        x ─► Add(·, 3) ─► Clip(0, 6) ─► Div(·, 6) | Mul(·, 1/6) ─► y   (paddle2onnx hard_sigmoid, α = 1/6)
    """

    name = "clip(α·x+β, 0, 1) ⇒ HardSigmoid(x, α, β)"
    anchor = "Clip"
    pattern = AnyOf(Op("Div", _clip6, Const(6.0)), Product(_clip6, Const(1 / 6)),
                    Op("Clip", Sum(Product(_x, Const(name="alpha")), Const(name="beta")), Const(0.0), Const(1.0)))

    def check(self, m, g):
        return _same_shape(m, g)

    def rewrite(self, m, g):
        if "alpha" in m.binds:
            alpha, beta = float(m["alpha.value"].reshape(-1)[0]), float(m["beta.value"].reshape(-1)[0])
        else:
            alpha, beta = 1 / 6, 0.5
        return [self.new_layer(g, m, "HardSigmoid", [m["x"]], attrs={"alpha": alpha, "beta": beta})]


class MishRule(Rule):
    """x·tanh(softplus(x)), softplus as Softplus or log(1 + exp(x)) ⇒ Mish(x) (YOLOv4/v5 exports).
    Mish's reference uses torch's softplus, which is exact where exp(x) overflows (x > 88): the written-out
    form gives log(inf) = inf, tanh(inf) = 1, so both give x there."""

    name = "x·tanh(softplus(x)) ⇒ Mish(x)"
    anchor = "Tanh"
    _softplus = AnyOf(Op("Softplus", _x), Op("Log", Sum(Op("Exp", _x), Const(1.0))))
    pattern = Product(_x, Op("Tanh", _softplus))

    def check(self, m, g):
        return _same_shape(m, g)

    def rewrite(self, m, g):
        return [self.new_layer(g, m, "Mish", [m["x"]])]


RULES = [HardSwishRule(), HardSigmoidRule(), MishRule()]
