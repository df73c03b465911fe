"""Softmax written out → one Softmax layer (ir/ops/nn_misc.py, along one axis).

Exporters: torch.onnx.export of hand-written softmax (`e = exp(x - x.max(-1, keepdim=True)); e / e.sum(...)`,
common in custom attention code and older model zoos) at every opset, legacy and dynamo, and TF/Keras
converters. The fused op computes the max-subtracted form, so the unguarded exp(x)/Σexp(x) form becomes
safer (no overflow for large x) and equal wherever the original was finite.
"""

from ..pattern import AnyOf, Op, Var
from .base import Rule, reduction_axes

_x = Var("x")
# the Exp appears twice (numerator and sum): the second occurrence must be the same layer with the same x
_exp = AnyOf(Op("Exp", Op("Sub", _x, Op("ReduceMax", _x, Var("max_axes"), name="max"))), Op("Exp", _x))
_sum = Op("ReduceSum", _exp, Var("sum_axes"), name="sum")


class SoftmaxDecomposed(Rule):
    """exp(x − max(x)) / Σ exp(x − max(x)) along one axis (keepdims reductions), or without the max:

        x ──┬─► ReduceMax(axis) ─► Sub(x, ·) ─► Exp ─┬─► ReduceSum(axis) ─► Div(e, ·) ─► y
            └──────────────────────────┘            └────────────────────────┘
    """

    name = "eˣ⁻ᵐᵃˣ⁽ˣ⁾ / Σ eˣ⁻ᵐᵃˣ⁽ˣ⁾ ⇒ Softmax(x, axis)"
    anchor = "ReduceSum"
    pattern = AnyOf(Op("Div", _exp, _sum), Op("Mul", _exp, Op("Reciprocal", _sum)))

    def check(self, m, g):
        rank = g.rank(m["x"])
        axes, why = reduction_axes(g, m["sum"])
        if axes is None:
            return why
        if len(axes) != 1:
            return f"the sum runs over axes {axes}, Softmax normalises along one axis"
        if "max" in m.binds:
            max_axes, why = reduction_axes(g, m["max"])
            if max_axes != axes:
                return why or f"max over axes {max_axes} but sum over axes {axes}"
        if not g.same_shape(m["x"], m.root.outputs[0]):
            return "the output shape differs from the input shape"
        dt = g.dtype(m["x"])
        if dt is None or not dt.is_floating_point:
            return f"softmax of a {dt} tensor"
        m.binds["axis"] = axes[0] - rank if rank else axes[0]
        return None

    def rewrite(self, m, g):
        return [self.new_layer(g, m, "Softmax", [m["x"]], attrs={"axis": m["axis"]})]


class SoftmaxFlattened(Rule):
    """Softmax-1…11 semantics (rows = the dims before `axis`) over the LAST axis, as the importer writes it
    when x's rank is unknown at import time (legacy exports at opset < 13 rarely record intermediate shapes):

        x ─► Flatten(axis=r−1) ─► Softmax(axis=1) ─► Reshape(·, Shape(x)) ─► y   ⇒   Softmax(x, axis=−1)
    Same for LogSoftmax and Hardmax. Saves two copies and lets attention fusion see the softmax.
    """

    name = "Reshape(Softmax(Flatten(x, r−1)), shape(x)) ⇒ Softmax(x, −1)"
    anchor = {"Softmax", "LogSoftmax", "Hardmax"}
    pattern = Op("Reshape", Op("Softmax|LogSoftmax|Hardmax", Op("Flatten", Var("x"), name="flatten"), name="sm"),
                 Var("shape"), name="reshape")

    def check(self, m, g):
        rank = g.rank(m["x"])
        if rank is None:
            return f"the rank of {m['x']!r} is unknown ({g.shape_error})"
        axis = m["flatten"].attrs.get("axis", 1)
        if axis % max(rank, 1) != rank - 1 and rank > 0:
            return f"Flatten at axis {axis} of a rank-{rank} tensor: the softmax spans several axes"
        if m["sm"].attrs.get("axis", -1) not in (1, -1):
            return f"the softmax runs over axis {m['sm'].attrs.get('axis')} of the flattened tensor"
        if not g.same_shape(m["x"], m.root.outputs[0]):
            return "the Reshape does not restore x's shape"
        return None

    def rewrite(self, m, g):
        return [self.new_layer(g, m, m["sm"].op, [m["x"]], attrs={"axis": -1})]


RULES = [SoftmaxFlattened(), SoftmaxDecomposed()]
