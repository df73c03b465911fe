"""Triton expressions for the ops a PointwiseChain may hold (ir.ops.fused.POINTWISE_OPS).

`expression(op, args, attrs, arg_dtypes, need)` returns one Triton expression computing the op on values
already loaded and widened (float16/bfloat16 → float32); `need` collects the fast-math helpers it calls
(codegen/fastmath.py). Semantics follow each op's torch reference, NaN propagation included (Max/Min/Relu/
Clip keep NaN as torch does). Exceptions, documented: Exp/Log/Sin/Cos/Sqrt use Triton's fast versions on
GPU (≤ 2 ulp); Gelu uses the branch-free erf of fastmath.py (grade "f32" unless every chain output is a
half type, then "lo"; "lo16" when all are float16: only then can the lean degree-5 variant be switched on,
being fitted to float16's half-ulp — in bfloat16 it would be 8 ulp off near |x| = 6, degree 6 is 2);
Softplus is log(1 + eˣ) below 20 (torch: log1p), Elu/Selu/Celu use eˣ − 1 (torch: expm1) — all within 1e-7
absolute of torch in float32.
"""

import torch

from ..ir import dtype_from_name
from ..ir.ops.low_precision import INT_RANGES

TL = {torch.float32: "tl.float32", torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16",
      torch.float64: "tl.float64", torch.int8: "tl.int8", torch.int16: "tl.int16", torch.int32: "tl.int32",
      torch.int64: "tl.int64", torch.uint8: "tl.uint8", torch.bool: "tl.int1"}
NAN_ALL = "propagate_nan=tl.PropagateNan.ALL"


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Half types are held in float32 inside a generated kernel."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _f(dtype) -> bool:
    return dtype is not None and dtype.is_floating_point


def _max(a, b, dtype):
    return f"tl.maximum({a}, {b}, {NAN_ALL})" if _f(dtype) else f"tl.maximum({a}, {b})"


def _min(a, b, dtype):
    return f"tl.minimum({a}, {b}, {NAN_ALL})" if _f(dtype) else f"tl.minimum({a}, {b})"


def _fold(fn, args, dtype):
    out = args[0]
    for b in args[1:]:
        out = fn(out, b, dtype)
    return out


def _cast(a, to: str, src: torch.dtype) -> str:
    dst = dtype_from_name(to)
    if dst == torch.bool:
        return f"({a} != 0)"
    if dst in (torch.float16, torch.bfloat16):      # round to the half type, keep computing in float32
        return f"{a}.to({TL[dst]}).to(tl.float32)"
    return f"{a}.to({TL[dst]})"


def _pow(a, b, attrs, dts, need):
    e = float(b)
    table = {1.0: f"{a}", 2.0: f"({a} * {a})", 3.0: f"({a} * {a} * {a})", 4.0: f"(({a} * {a}) * ({a} * {a}))",
             0.5: f"tl.sqrt_rn({a})", -0.5: f"(1.0 / tl.sqrt_rn({a}))", -1.0: f"(1.0 / {a})",
             -2.0: f"(1.0 / ({a} * {a}))"}
    if e not in table:
        raise ValueError(f"Pow exponent {e} has no exact generated form")
    return table[e]


def _gelu(a, attrs, dts, need, grade):
    if attrs.get("approximate", "none") == "tanh":
        need.add("gelu_tanh")
        return f"gelu_tanh({a})"
    if dts[0] == torch.float64:
        return f"({a} * 0.5 * (1.0 + tl.erf({a} * 0.7071067811865476)))"
    if grade.startswith("lo"):          # "lo16": float16 outputs only, where the lean switch may apply
        need.add("gelu_erf_lo")
        return f"gelu_erf_lo({a}, {'LEAN' if grade == 'lo16' else 'False'})"
    need.add(f"gelu_erf_{grade}")
    return f"gelu_erf_{grade}({a})"


def _is_inf(a, attrs):
    """±inf is the only non-NaN value whose difference with itself is NaN (no inf literal needed)."""
    inf = f"(({a} == {a}) & (({a} - {a}) != ({a} - {a})))"
    pos, neg = attrs.get("detect_positive", 1), attrs.get("detect_negative", 1)
    if pos and neg:
        return inf
    if pos:
        return f"({inf} & ({a} > 0))"
    if neg:
        return f"({inf} & ({a} < 0))"
    return f"({a} != {a}) & ({a} == {a})"


def expression(op: str, args: list[str], attrs: dict, dts: list, need: set, grade: str = "f32") -> str:
    """Triton expression for `op` on `args` (variable names or literals; '' = absent optional input)."""
    a = args[0] if args else ""
    b = args[1] if len(args) > 1 else ""
    d = dts[0] if dts else None
    zero = "0.0" if _f(d) else "0"
    simple = {
        "Add": lambda: f"({a} + {b})", "Sub": lambda: f"({a} - {b})", "Mul": lambda: f"({a} * {b})",
        "Div": lambda: f"({a} / {b})", "Neg": lambda: f"(-{a})", "Abs": lambda: f"tl.abs({a})",
        "Identity": lambda: a, "Max": lambda: _fold(_max, args, d), "Min": lambda: _fold(_min, args, d),
        "Sum": lambda: "(" + " + ".join(args) + ")",
        "Mean": lambda: "((" + " + ".join(args) + f") / {float(len(args))!r})",
        "Relu": lambda: f"tl.where({a} < 0, {zero}, {a})",
        "Sign": lambda: (f"tl.where({a} > 0, 1.0, tl.where({a} < 0, -1.0, 0.0))" if _f(d)      # torch: sign(NaN) = 0
                         else f"tl.where({a} > 0, 1, tl.where({a} < 0, -1, 0)).to({TL[d]})"),
        "Where": lambda: f"tl.where({a}, {b}, {args[2]})",
        "Cast": lambda: _cast(a, attrs["to"], d),
        "Equal": lambda: f"({a} == {b})", "Less": lambda: f"({a} < {b})", "LessOrEqual": lambda: f"({a} <= {b})",
        "Greater": lambda: f"({a} > {b})", "GreaterOrEqual": lambda: f"({a} >= {b})",
        "And": lambda: f"({a} & {b})", "Or": lambda: f"({a} | {b})", "Xor": lambda: f"({a} ^ {b})",
        "Not": lambda: f"({a} == 0)",
        "Clip": lambda: _clip(a, b, args[2] if len(args) > 2 else "", d),
        "Sqrt": lambda: f"tl.sqrt_rn({a})", "Exp": lambda: f"tl.exp({a})", "Log": lambda: f"tl.log({a})",
        "Erf": lambda: f"tl.erf({a})", "Reciprocal": lambda: f"(1.0 / {a})", "Floor": lambda: f"tl.floor({a})",
        "Ceil": lambda: f"tl.ceil({a})", "Sin": lambda: f"tl.sin({a})", "Cos": lambda: f"tl.cos({a})",
        "Sigmoid": lambda: f"tl.sigmoid({a})",
        "LeakyRelu": lambda: f"tl.where({a} > 0, {a}, {a} * {float(attrs['alpha'])!r})",
        "Elu": lambda: f"tl.where({a} > 0, {a}, {float(attrs['alpha'])!r} * (tl.exp({a}) - 1.0))",
        "Celu": lambda: (f"(tl.maximum({a}, 0.0, {NAN_ALL}) + tl.minimum(0.0, {float(attrs['alpha'])!r} * "
                         f"(tl.exp({a} / {float(attrs['alpha'])!r}) - 1.0), {NAN_ALL}))"),
        "Selu": lambda: (f"({float(attrs['gamma'])!r} * tl.where({a} > 0, {a}, {float(attrs['alpha'])!r} * "
                         f"(tl.exp({a}) - 1.0)))"),
        "ThresholdedRelu": lambda: f"tl.where({a} > {float(attrs['alpha'])!r}, {a}, 0.0)",
        "HardSigmoid": lambda: (f"tl.minimum(tl.maximum({float(attrs['alpha'])!r} * {a} + {float(attrs['beta'])!r}, "
                                f"0.0, {NAN_ALL}), 1.0, {NAN_ALL})"),
        "HardSwish": lambda: f"({a} * tl.minimum(tl.maximum({a} / 6.0 + 0.5, 0.0, {NAN_ALL}), 1.0, {NAN_ALL}))",
        "Softplus": lambda: f"tl.where({a} > 20.0, {a}, tl.log(1.0 + tl.exp({a})))",
        "Softsign": lambda: f"({a} / (1.0 + tl.abs({a})))",
        "PRelu": lambda: f"tl.where({a} >= 0, {a}, {a} * {b})",
        "IsNaN": lambda: f"({a} != {a})",
        "IsInf": lambda: _is_inf(a, attrs),
    }
    if op in simple:
        return simple[op]()
    if op == "Pow":
        return _pow(a, b, attrs, dts, need)
    if op == "Gelu":
        return _gelu(a, attrs, dts, need, grade)
    if op == "QuantizeLinear":
        return _quantize(args, attrs, dts, need)
    if op in ("Tanh", "Mish"):
        tanh = "tanh_f32" if d != torch.float64 else None
        if tanh is None:
            inner = a if op == "Tanh" else f"tl.where({a} > 20.0, {a}, tl.log(1.0 + tl.exp({a})))"
            t = f"(1.0 - 2.0 / (tl.exp(2.0 * {inner}) + 1.0))"
        else:
            need.add(tanh)
            inner = a if op == "Tanh" else f"tl.where({a} > 20.0, {a}, tl.log(1.0 + tl.exp({a})))"
            t = f"{tanh}({inner})"
        return t if op == "Tanh" else f"({a} * {t})"
    raise KeyError(f"generated kernels do not implement {op}")


def _quantize(args, attrs, dts, need) -> str:
    """Per-tensor QuantizeLinear (literal scale and zero point, chain_check) to int8/uint8 — the type of its zero
    point, else output_dtype, else uint8 (ONNX's default): quantize_int on the float32 value, then the integer type
    (the value is an integer in range, so the conversion is exact)."""
    x, s = args[0], args[1]
    z = args[2] if len(args) > 2 and args[2] else "0"
    out = dts[2] if len(dts) > 2 and dts[2] is not None else (
        dtype_from_name(attrs["output_dtype"]) if attrs.get("output_dtype") else torch.uint8)
    lo, hi = INT_RANGES[out]
    need.add("quantize_int")
    return (f"quantize_int(({x}).to(tl.float32), {s}, {z} * 1.0, {float(lo)!r}, {float(hi)!r})"
            f".to(tl.int32).to({TL[out]})")


def _clip(a, lo, hi, dtype):
    out = a
    if lo:
        out = _max(out, lo, dtype)
    if hi:
        out = _min(out, hi, dtype)
    return out


SUPPORTED = {"Add", "Sub", "Mul", "Div", "Neg", "Abs", "Identity", "Max", "Min", "Sum", "Mean", "Relu", "Sign",
             "Where", "Cast", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor",
             "Not", "Clip", "Sqrt", "Exp", "Log", "Erf", "Reciprocal", "Floor", "Ceil", "Sin", "Cos", "Sigmoid",
             "LeakyRelu", "Elu", "Celu", "Selu", "ThresholdedRelu", "HardSigmoid", "HardSwish", "Softplus",
             "Softsign", "PRelu", "IsNaN", "IsInf", "Pow", "Gelu", "Tanh", "Mish", "QuantizeLinear"}
