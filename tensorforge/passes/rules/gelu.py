"""GELU: the decomposed erf and tanh forms → one Gelu layer (ir/ops/activation.py).

Exporters that decompose GELU: torch.onnx.export (legacy, every opset below 20: nn.GELU and F.gelu) and the
dynamo exporter below opset 20 emit the erf form; `approximate="tanh"` (GPT-2's gelu_new) emits the tanh
form, with x·x·x (legacy) or Pow(x, 3) (dynamo). Constants are accepted within two units in the last place
of their dtype, so a float16 model's √2 ≈ 1.4140625 still matches.
"""

import math

from ..pattern import AnyOf, Const, Op, Product, Sum, Var
from .base import Rule

SQRT2 = math.sqrt(2.0)


def _floating(g, name):
    dt = g.dtype(name)
    return None if dt is not None and dt.is_floating_point else f"GELU needs a floating-point input, found {dt}"


def _same_shape_check(m, g):
    x, y = m["x"], m.root.outputs[0]
    if not g.same_shape(x, y):
        return (f"the constants change the shape ({g.shape(x)} → {g.shape(y)}): Gelu(x) would not broadcast them"
                if g.values(x) is not None else f"shapes are unknown ({g.shape_error})")
    return None


class GeluErf(Rule):
    """x·½·(1 + erf(x/√2)) — any association/order of the products, x/√2 or x·(1/√2):

        x ──┬──► Div(·, √2) ─► Erf ─► Add(·, 1) ─► Mul(x, ·) ─► Mul(·, 0.5) ─► y      (legacy, opset 11–17)
            └──────────────────────────────────────┘
        x ─► Div(·, √2) ─► Erf ─► Add(·, 1) ─► Mul(0.5, ·) ─► Mul(x, ·) ─► y          (dynamo, opset 18)
    """

    name = "x·½·(1+erf(x/√2)) ⇒ Gelu(x)"
    anchor = "Erf"
    _x = Var("x", _floating)
    _one_plus_erf = Sum(Const(1.0), Op("Erf", AnyOf(Op("Div", _x, Const(SQRT2)), Product(_x, Const(1 / SQRT2)))))
    pattern = AnyOf(Product(_x, Const(0.5), _one_plus_erf), Op("Div", Product(_x, _one_plus_erf), Const(2.0)))

    def check(self, m, g):
        return _same_shape_check(m, g)

    def rewrite(self, m, g):
        return [self.new_layer(g, m, "Gelu", [m["x"]], attrs={"approximate": "none"})]


class GeluTanh(Rule):
    """x·½·(1 + tanh(√(2/π)·(x + 0.044715·x³))), x³ as x·x·x or Pow(x, 3):

        x ─► Mul(x,x) ─► Mul(x,·) ─► Mul(0.044715,·) ─► Add(x,·) ─► Mul(√(2/π),·) ─► Tanh ─► Add(1,·)
          ─► Mul(x,·) ─► Mul(0.5,·) ─► y                 (legacy; dynamo emits Pow(x, 3.0) for the cube)
    """

    name = "x·½·(1+tanh(√(2/π)·(x+0.044715·x³))) ⇒ Gelu(x, tanh)"
    anchor = "Tanh"
    _x = Var("x", _floating)
    _c = Const(0.044715)
    _cube_term = AnyOf(Product(_c, _x, _x, _x), Product(_c, Op("Pow", _x, Const(3.0))))
    _inner = Product(Const(math.sqrt(2 / math.pi)), Sum(_x, _cube_term))
    pattern = Product(_x, Const(0.5), Sum(Const(1.0), Op("Tanh", _inner)))

    def check(self, m, g):
        return _same_shape_check(m, g)

    def rewrite(self, m, g):
        return [self.new_layer(g, m, "Gelu", [m["x"]], attrs={"approximate": "tanh"})]


RULES = [GeluErf(), GeluTanh()]
