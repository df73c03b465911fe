"""Importers for elementwise, comparison, logic and activation ops.

All of these map 1:1 onto the IR op of the same name with numpy broadcasting. Versions before 7 with legacy
`broadcast`/`axis` attributes (Add/Sub/Mul/Div-6, Pow-1) and Max/Min/Sum/PRelu-6 are in legacy.py.
"""

from ...ir import dtype_name
from ...util.errors import ModelError
from ..registry import importer
from ..tensors import torch_dtype


def _same(ir_op, attr_names=()):
    def fn(ctx, node, inputs):
        attrs = {k: node.attrs[k] for k in attr_names if k in node.attrs}
        return [ctx.add1(ir_op, inputs, attrs)]
    return fn


_SIMPLE = {
    # op: (versions, attributes passed through)
    "Add": ((7, 13, 14), ()), "Sub": ((7, 13, 14), ()), "Mul": ((7, 13, 14), ()), "Div": ((7, 13, 14), ()),
    "Mod": ((10, 13, 28), ("fmod",)), "Pow": ((7, 12, 13, 15), ()),
    "Max": ((8, 12, 13), ()), "Min": ((8, 12, 13), ()), "Sum": ((8, 13), ()), "Mean": ((8, 13), ()),
    "Neg": ((6, 13), ()), "Abs": ((6, 13), ()), "Sqrt": ((6, 13), ()), "Exp": ((6, 13), ()), "Log": ((6, 13), ()),
    "Erf": ((9, 13), ()), "Reciprocal": ((6, 13), ()), "Floor": ((6, 13), ()), "Ceil": ((6, 13), ()),
    "Round": ((11, 22), ()), "Sign": ((9, 13), ()),
    "Sin": ((7, 22), ()), "Cos": ((7, 22), ()), "Tan": ((7, 22), ()), "Asin": ((7, 22), ()), "Acos": ((7, 22), ()),
    "Atan": ((7, 22), ()), "Sinh": ((9, 22), ()), "Cosh": ((9, 22), ()), "Asinh": ((9, 22), ()),
    "Acosh": ((9, 22), ()), "Atanh": ((9, 22), ()),
    "Not": ((1,), ()), "IsNaN": ((9, 13, 20), ()), "IsInf": ((10, 20), ("detect_negative", "detect_positive")),
    "Equal": ((7, 11, 13, 19), ()), "Less": ((7, 9, 13), ()), "LessOrEqual": ((12, 16), ()),
    "Greater": ((7, 9, 13), ()), "GreaterOrEqual": ((12, 16), ()),
    "And": ((7,), ()), "Or": ((7,), ()), "Xor": ((7,), ()), "Where": ((9, 16), ()),
    "Relu": ((6, 13, 14), ()), "Sigmoid": ((6, 13), ()), "Tanh": ((6, 13), ()),
    "LeakyRelu": ((6, 16), ("alpha",)), "Elu": ((6, 22), ("alpha",)), "Celu": ((12, 28), ("alpha",)),
    "Selu": ((6, 22), ("alpha", "gamma")), "ThresholdedRelu": ((10, 22), ("alpha",)),
    "HardSigmoid": ((6, 22), ("alpha", "beta")), "HardSwish": ((14, 22), ()),
    "Softplus": ((1, 22), ()), "Softsign": ((1, 22), ()), "Mish": ((18, 22), ()),
    "PRelu": ((9, 16), ()), "Gelu": ((20,), ("approximate",)),
    "Identity": ((1, 13, 14, 16, 19, 21, 23, 24, 25), ()),
}

for _op, (_versions, _attrs) in _SIMPLE.items():
    importer(_op, versions=_versions)(_same(_op, _attrs))


_FLOAT8 = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")


def _cast_modes(node, to: str | None) -> dict:
    """`saturate` (Cast/CastLike-19+) and `round_mode` (24+), kept only where they act: saturate for float8
    targets, both for float8e8m0 (to=None: target unknown until run time, keep both). Versions without them
    take the IR defaults (saturate=1, round_mode='up')."""
    out = {k: node.attrs[k] for k in ("saturate", "round_mode") if k in node.attrs}
    if out.get("round_mode", "up") not in ("up", "down", "nearest"):
        raise ModelError(f"{node.where()}: {node.op_type} round_mode {out['round_mode']!r} is not one of up, down, "
                         "nearest", "fix the attribute in the model (ONNX Cast-24+)")
    if to is None or to == "float8_e8m0fnu":
        return out
    return {k: v for k, v in out.items() if k == "saturate" and to in _FLOAT8}


@importer("Cast", versions=(6, 9, 13, 19, 21, 23, 24, 25, 28))
def import_cast(ctx, node, inputs):
    to = dtype_name(torch_dtype(node.attrs["to"], f"{node.where()}: "))
    return [ctx.add1("Cast", inputs, {"to": to, **_cast_modes(node, to)})]


@importer("CastLike", versions=(15, 19, 21, 23, 24, 25))
def import_cast_like(ctx, node, inputs):
    like = ctx.info(inputs[1])
    if like is None or like.dtype is None:
        return [ctx.add1("CastLike", inputs, _cast_modes(node, None))]
    to = dtype_name(like.dtype)
    return [ctx.add1("Cast", [inputs[0]], {"to": to, **_cast_modes(node, to)})]


@importer("Clip", versions=(6,))
def import_clip_6(ctx, node, inputs):
    """Clip-6 carries min/max as attributes (defaults ±FLT_MAX); later versions take them as inputs."""
    lo = ctx.const(float(node.attrs.get("min", -3.4028234663852886e38)), name="min")
    hi = ctx.const(float(node.attrs.get("max", 3.4028234663852886e38)), name="max")
    return [ctx.add1("Clip", [inputs[0], lo, hi])]


@importer("Clip", versions=(11, 12, 13))
def import_clip(ctx, node, inputs):
    return [ctx.add1("Clip", (inputs + ["", ""])[:3])]
