"""Is a PointwiseChain's program well formed? Checked before any source is generated from it.

Entry point: `chain_problem(attrs, n_inputs) -> reason | None`. The program comes from the passes at build time
and from an engine file at load time, so it is treated as untrusted data: every step's op must be one the
generator implements (codegen/pointwise_ops.py) with exactly its OpSpec's attributes as JSON scalars, every argument
a chain input, a literal or an earlier step; literals are single numbers of a chain dtype; outputs name steps; the
dtypes are chain dtypes. Only then does `generate` turn it into text, and the text holds only names made here
(`in3`, `s7`, `c0`), repr()'d numbers and dtype names from a fixed table (not even the layer's name).
"""

import math
import re

from ..ir import dtype_name, get_spec, has_spec
from ..ir.ops.fused import CHAIN_DTYPES, POW_EXPONENTS
from .pointwise_ops import SUPPORTED

MAX_STEPS = 4096                     # a chain longer than this is not something the passes make
MAX_RANK = 16
_DTYPES = {dtype_name(d) for d in CHAIN_DTYPES}
_REF = re.compile(r"^(in|c|s)(0|[1-9][0-9]{0,5})$")
_HASH = re.compile(r"^([0-9a-f]{64})?$")
_WORD = re.compile(r"^[A-Za-z0-9_]{0,32}$")
# string attributes the generator reads, with the values it implements; other strings (Cast.round_mode …) are
# never written into the source and only need to be short words
_STRING_ATTRS = {("Gelu", "approximate"): ("none", "tanh"), ("Cast", "to"): tuple(sorted(_DTYPES))}


def _scalar(v) -> bool:
    return isinstance(v, (bool, int, float))


def _arg_problem(arg, k: int, n_inputs: int, n_consts: int) -> str | None:
    if arg == "":
        return None
    if not isinstance(arg, str) or not _REF.match(arg):
        return f"argument {str(arg)[:40]!r} is not a chain reference (inN, cN or sN)"
    kind, index = _REF.match(arg).groups()
    bound = {"in": n_inputs, "c": n_consts, "s": k}[kind]
    if int(index) >= bound:
        return f"argument {arg!r} refers to nothing ({bound} {'earlier steps' if kind == 's' else kind + ' values'})"
    return None


def _step_problem(step, k: int, n_inputs: int, n_consts: int) -> str | None:
    if not isinstance(step, dict) or set(step) != {"op", "args", "attrs"}:
        return "is not an object with exactly op, args and attrs"
    op, args, attrs = step["op"], step["args"], step["attrs"]
    if not isinstance(op, str) or op not in SUPPORTED or not has_spec(op):
        return f"op {str(op)[:40]!r} is not an op a generated kernel implements"
    if not isinstance(args, list) or not 1 <= len(args) <= 64:
        return "args is not a list of 1..64 references"
    for arg in args:
        why = _arg_problem(arg, k, n_inputs, n_consts)
        if why:
            return why
    if not isinstance(attrs, dict) or set(attrs) != set(get_spec(op).attrs):
        return f"attrs of {op} must be exactly {sorted(get_spec(op).attrs)}"
    for name, value in attrs.items():
        choices = _STRING_ATTRS.get((op, name))
        if choices is not None:
            if value not in choices:
                return f"attribute {op}.{name} = {str(value)[:40]!r} is not one of {list(choices)}"
        elif isinstance(value, str):
            if not _WORD.match(value):
                return f"attribute {op}.{name} = {value[:40]!r} is not a short word"
        elif value is not None and (not _scalar(value) or (isinstance(value, float) and not math.isfinite(value))):
            return f"attribute {op}.{name} is not a finite number, a word or null"
    return None


def _quantize_problem(step, consts) -> str | None:
    """The one QuantizeLinear form the generator writes: per tensor, a literal float32 scale and a literal int8/uint8
    zero point (or none), float32 arithmetic, no blocks."""
    args, attrs = step["args"], step["attrs"]
    if len(args) < 2 or not args[1].startswith("c") or consts[int(args[1][1:])]["dtype"] != "float32":
        return "QuantizeLinear needs a literal float32 scale"
    if len(args) > 2 and args[2] and (not args[2].startswith("c") or
                                      consts[int(args[2][1:])]["dtype"] not in ("int8", "uint8")):
        return "QuantizeLinear needs a literal int8/uint8 zero point"
    if len(args) > 3 or attrs.get("block_size") or attrs.get("precision") not in (None, "float32"):
        return "QuantizeLinear is generated per tensor in float32 only"
    if (len(args) < 3 or not args[2]) and attrs.get("output_dtype") not in (None, "int8", "uint8"):
        return "QuantizeLinear is generated to int8/uint8 only"
    return None


def _const_problem(c) -> str | None:
    if not isinstance(c, dict) or set(c) != {"value", "dtype", "shape"}:
        return "is not an object with exactly value, dtype and shape"
    if c["dtype"] not in _DTYPES:
        return f"dtype {str(c['dtype'])[:40]!r} is not a chain dtype"
    if not _scalar(c["value"]):
        return "value is not a number"
    shape = c["shape"]
    if not isinstance(shape, list) or len(shape) > MAX_RANK or any(d != 1 or isinstance(d, bool) for d in shape):
        return "shape is not a list of ones (a literal holds one value)"
    return None


def chain_problem(attrs, n_inputs: int) -> str | None:
    """Why the PointwiseChain attributes `attrs` (with `n_inputs` inputs) are not a program codegen may turn into
    source, naming the field; None when they are."""
    if not isinstance(attrs, dict):
        return "attrs is not an object"
    steps, consts = attrs.get("steps"), attrs.get("consts", [])
    outputs, out_dtypes = attrs.get("outputs"), attrs.get("out_dtypes")
    if not isinstance(steps, list) or not 1 <= len(steps) <= MAX_STEPS:
        return f"steps is not a list of 1..{MAX_STEPS} steps"
    if not isinstance(consts, list) or len(consts) > MAX_STEPS * 4:
        return "consts is not a list"
    for k, c in enumerate(consts):
        why = _const_problem(c)
        if why:
            return f"consts[{k}] {why}"
    for k, step in enumerate(steps):
        why = _step_problem(step, k, n_inputs, len(consts))
        if why:
            return f"steps[{k}] {why}"
        if step["op"] == "QuantizeLinear":
            why = _quantize_problem(step, consts)
            if why:
                return f"steps[{k}] {why}"
        if step["op"] == "Pow":
            e = step["args"][1] if len(step["args"]) > 1 else ""
            if not e.startswith("c") or float(consts[int(e[1:])]["value"]) not in POW_EXPONENTS:
                return f"steps[{k}] Pow needs a literal exponent in {POW_EXPONENTS}"
    if not isinstance(outputs, list) or not 1 <= len(outputs) <= 64:
        return "outputs is not a list of 1..64 step references"
    for j, ref in enumerate(outputs):
        if not isinstance(ref, str) or not ref.startswith("s") or _arg_problem(ref, len(steps), 0, 0):
            return f"outputs[{j}] {str(ref)[:40]!r} is not a step of the chain"
    if not isinstance(out_dtypes, list) or len(out_dtypes) != len(outputs) or any(d not in _DTYPES for d in out_dtypes):
        return "out_dtypes is not one chain dtype per output"
    if not isinstance(attrs.get("kernel", ""), str) or not _HASH.match(attrs.get("kernel", "")):
        return "kernel is not a SHA-256 hex digest"
    unknown = set(attrs) - {"steps", "consts", "outputs", "out_dtypes", "kernel"}
    if unknown:
        return f"unknown attribute {sorted(unknown)[0]!r}"
    return None
