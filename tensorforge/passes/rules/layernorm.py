"""LayerNorm written out → one LayerNormalization layer (ir/ops/norm.py: axis, epsilon, stash_type).

Exporters: torch.onnx.export (legacy) of nn.LayerNorm below opset 17 (there is no LayerNormalization op
before 17), and of hand-written layer norms (BERT's original BertLayerNorm, TF-ported models) at every
opset, legacy and dynamo — with x·x or Pow(x, 2), Div or Mul(Reciprocal), scale and bias optional, and the
mixed-precision form that casts to float32 for the statistics and back before the affine part.
Only fused when both reductions run over the same LAST axes with keepdims, and ε is a scalar constant.
"""

import torch

from ...ir import dtype_name
from ..pattern import AnyOf, Const, Op, Var
from .base import Rule, reduction_axes


def _eps(c: torch.Tensor):
    return None if c.dtype.is_floating_point and float(c.reshape(-1)[0]) >= 0 else "ε must be a non-negative float"


_x = Var("x")
_mean = Op("ReduceMean", _x, Var("axes_mean"), name="mean")
_d = Op("Sub", _x, _mean)
_var = Op("ReduceMean", AnyOf(Op("Pow", _d, Const(2.0)), Op("Mul", _d, _d)), Var("axes_var"), name="var")
_std = AnyOf(Op("Sqrt", Op("Add", _var, Const(name="eps", pred=_eps))), Op("Sqrt", _var))
_norm = AnyOf(Op("Div", _d, _std), Op("Mul", _d, Op("Reciprocal", _std)))
_norm_cast = AnyOf(Op("Cast", _norm, name="cast_out"), _norm)
_scaled = AnyOf(Op("Mul", _norm_cast, Var("scale")), _norm_cast)
PATTERN = AnyOf(Op("Add", _scaled, Var("bias")), _scaled)


class LayerNormDecomposed(Rule):
    """(x − E[x]) / √(Var[x] + ε) · γ + β over the last axes:

        x ──┬─► ReduceMean ─► Sub(x, ·) ─┬─► Pow(·, 2) ─► ReduceMean ─► Add(ε) ─► Sqrt ─┐
            └────────────────┘           └──────────────────────────────────► Div(·, ·) ─► Mul(γ) ─► Add(β) ─► y
        (x may be Cast(x₀ → float32) with a Cast back to x₀'s type after Div: then LayerNorm reads x₀)
    """

    name = "(x−E[x])/√(Var[x]+ε)·γ+β ⇒ LayerNormalization(x, γ, β)"
    anchor = "ReduceMean"
    pattern = PATTERN

    def check(self, m, g):
        x = m["x"]
        rank, dt = g.rank(x), g.dtype(x)
        if rank is None or dt is None:
            return f"shape of {x!r} unknown ({g.shape_error})"
        if not dt.is_floating_point:
            return f"LayerNorm of a {dt} tensor"
        axes, why = reduction_axes(g, m["mean"])
        if axes is None:
            return why
        axes_var, why = reduction_axes(g, m["var"])
        if axes_var != axes:
            return why or f"mean over axes {axes} but variance over axes {axes_var}"
        if axes != list(range(rank - len(axes), rank)):
            return f"the statistics run over axes {axes}, not over the last axes of a rank-{rank} tensor"
        norm_shape = g.shape(x)[axes[0]:]
        m.binds["axis"] = axes[0] - rank
        m.binds["norm_shape"] = norm_shape
        source = x
        if "cast_out" in m.binds:
            cast_in = g.producer(x)
            back = m["cast_out"].attrs.get("to")
            if cast_in is None or cast_in.op != "Cast" or g.dtype(cast_in.inputs[0]) is None or \
                    dtype_name(g.dtype(cast_in.inputs[0])) != back:
                return f"a Cast to {back} inside the LayerNorm without a matching Cast of its input"
            source = cast_in.inputs[0]
        m.binds["source"] = source
        for key in ("scale", "bias"):
            if key in m.binds:
                c = g.constant(m[key])
                if c is None:
                    return f"the {key} {m[key]!r} is computed at run time (LayerNormalization takes constant {key})"
                why = _fits(c, norm_shape)
                if why:
                    return f"{key}: {why}"
        if "scale" not in m.binds and any(d < 0 for d in norm_shape):
            return f"no scale and the normalised dims {norm_shape} are dynamic"
        if not g.same_shape(x, m.root.outputs[0]):
            return "the scale or bias broadcasts the output beyond x's shape"
        return None

    def rewrite(self, m, g):
        net, norm_shape = g.net, m["norm_shape"]
        scale = m.get("scale")
        if scale is None:
            scale = net.add_constant(net.unique_name(f"{m.root.name}/gamma"), torch.ones(norm_shape))
        else:
            scale = _as_norm_shape(net, scale, norm_shape)
        inputs = [m["source"], scale]
        if "bias" in m.binds:
            inputs.append(_as_norm_shape(net, m["bias"], norm_shape))
        eps = float(m["eps.value"].reshape(-1)[0]) if "eps" in m.binds else 0.0
        return [self.new_layer(g, m, "LayerNormalization", inputs,
                               attrs={"axis": m["axis"], "epsilon": eps, "stash_type": 1})]


def _fits(c: torch.Tensor, norm_shape) -> str | None:
    dims = list(c.shape)
    while dims and dims[0] == 1 and len(dims) > len(norm_shape):
        dims.pop(0)
    if len(dims) > len(norm_shape):
        return f"shape {tuple(c.shape)} has more dims than the normalised shape {tuple(norm_shape)}"
    for a, b in zip(reversed(dims), reversed(norm_shape)):
        if a != 1 and a != b:
            return f"shape {tuple(c.shape)} does not broadcast to the normalised shape {tuple(norm_shape)}"
    return None


def _as_norm_shape(net, name: str, norm_shape) -> str:
    """The constant `name` materialised in the normalised shape (a new constant only when needed)."""
    c = net.constants[name]
    if tuple(c.shape) == tuple(norm_shape):
        return name
    full = c.reshape(c.shape[-len(norm_shape):] if c.dim() > len(norm_shape) else c.shape).expand(norm_shape)
    return net.add_constant(net.unique_name(f"{name}/expanded"), full.contiguous().clone())


RULES = [LayerNormDecomposed()]
