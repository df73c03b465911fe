"""The engine manifest's schema: a small declarative description, and the checker that walks it.

Entry points: `parse_manifest(text)` (JSON with duplicate keys and nesting depth refused) and
`check_manifest(m)` (types, bounds, names). Both raise `SchemaViolation(field, message)`; serialize.py turns it
into one EngineFileError naming the file and the field. The cross-checks that need the weights and the op
registry (every tensor produced before use, attributes against the OpSpec, weights against the safetensors
header, dtypes against inference) live in `manifest_checks.py`. Imports ir, util only.
"""

import json
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_DEPTH = 48                  # JSON nesting (control-flow bodies nest a few levels; nothing legit nears this)
MAX_DIM = 2**31 - 1             # one dimension
MAX_ELEMENTS = 2**34            # one tensor (64 GiB of float32): larger is a crafted file, not a model
MAX_RANK = 16
MAX_ITEMS = 1 << 20             # any list or object
MAX_STR = 1 << 16               # any string
TACTIC_ID = re.compile(r"^[A-Za-z0-9_:\-]+\.[A-Za-z0-9_.\-]+(\[[A-Za-z0-9_=,.\-]*\])?$")   # kernels/registry.py ids


class SchemaViolation(Exception):
    def __init__(self, where: str, message: str):
        self.where, self.message = where or "(top level)", message
        super().__init__(f"{self.where}: {message}")


# ---- the schema language ----------------------------------------------------------------------------
@dataclass
class Int:
    lo: int = -(2**63)
    hi: int = 2**63 - 1


@dataclass
class Num:
    pass


@dataclass
class Str:
    pattern: re.Pattern | None = None
    choices: tuple = ()


@dataclass
class Bool:
    pass


@dataclass
class Null:
    pass


@dataclass
class AnyOf:
    options: tuple


@dataclass
class List:
    item: Any
    min_len: int = 0
    max_len: int = MAX_ITEMS


@dataclass
class Map:
    value: Any                  # keys are strings; values of one kind


@dataclass
class Obj:
    required: dict = field(default_factory=dict)
    optional: dict = field(default_factory=dict)
    extra: bool = False         # other keys allowed (their values: any JSON, depth-bounded)


class Json:
    """Any JSON value (already depth-bounded by the parser)."""


def Opt(s):
    return AnyOf((s, Null()))


DIM = AnyOf((Int(-1, MAX_DIM), Str(re.compile(r"^[A-Za-z_][A-Za-z0-9_.:\-]{0,127}$"))))
SHAPE = List(DIM, max_len=MAX_RANK)
CONCRETE_SHAPE = List(Int(0, MAX_DIM), max_len=MAX_RANK)
NAME = Str()
TENSOR_INFO = Obj({"name": NAME, "dtype": Opt(Str()), "shape": Opt(SHAPE)})
LAYER = Obj({"name": NAME, "op": Str(), "inputs": List(Str()), "outputs": List(Str()), "attrs": Map(Json()),
             "origin": List(Str()), "tactic": Str(TACTIC_ID), "placement": Str(choices=("device", "host")),
             "precision": Opt(Str())},
            {"point_tactics": Obj(optional={"min": Str(TACTIC_ID), "max": Str(TACTIC_ID)})})
PLUGIN_RECORD = Obj({"id": Str(), "namespace": Str(), "name": Str(), "version": Str(), "op": Str(),
                     "layers": List(Obj({"name": NAME}, {"attrs": Map(Json())}))},
                    {"signature": Map(Str()), "origin": Str(), "library": Bool()})
BUILD_INFO = Obj(      # the fields the runtime and inspect read; the rest is a record of the build
    optional={"flags": List(Str()), "device": Str(), "tensorforge_version": Str(), "torch_version": Str(),
              "build_seconds": Num(), "optimization_level": Int(0, 5),
              "memory": Obj(optional={"host_value_inputs": Map(List(Int(0, 1 << 16))), "peak_bytes": Int(0)},
                            extra=True),
              "graph_capture": Obj(required={"checked": Bool()},      # builder/graph_probe.py; inspect reads it
                                   optional={"why": Str(), "point": Str(),
                                             "blockers": List(Obj(required={"layer": Str(), "op": Str(),
                                                                            "tactic": Str(), "reason": Str()}))})},
    extra=True)
MANIFEST = Obj(
    required={"tensorforge_version": Str(), "format_version": Int(0, 2**31), "name": Str(),
              "inputs": List(TENSOR_INFO), "outputs": List(TENSOR_INFO, min_len=1),
              "profiles": List(Map(List(CONCRETE_SHAPE, 3, 3))), "tensors": List(TENSOR_INFO),
              "constants": List(NAME), "layers": List(LAYER), "plugins": List(PLUGIN_RECORD),
              "build_info": BUILD_INFO},
    optional={"byte_stored": Map(Str())},
    extra=True)      # newer optional fields (another engineer's) are read by whoever owns them


# ---- checking ---------------------------------------------------------------------------------------
def _type(v) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null",
            int: "an integer", float: "a number"}.get(type(v), type(v).__name__)


def check(value, spec, where: str = "") -> None:
    """Raise SchemaViolation at the first place `value` does not fit `spec`."""
    if isinstance(spec, AnyOf):
        errors = []
        for option in spec.options:
            try:
                check(value, option, where)
                return
            except SchemaViolation as e:
                errors.append(e)
        deepest = max(errors, key=lambda e: len(e.where))
        if deepest.where != (where or "(top level)"):
            raise deepest
        raise SchemaViolation(where, f"{_type(value)} is not allowed here ({'; '.join(e.message for e in errors)})")
    if isinstance(spec, Json):
        return
    if isinstance(spec, Int):
        if not isinstance(value, int) or isinstance(value, bool):
            raise SchemaViolation(where, f"expected an integer, got {_type(value)}")
        if not spec.lo <= value <= spec.hi:
            raise SchemaViolation(where, f"{value} is outside [{spec.lo}, {spec.hi}]")
    elif isinstance(spec, Num):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise SchemaViolation(where, f"expected a number, got {_type(value)}")
    elif isinstance(spec, Str):
        if not isinstance(value, str):
            raise SchemaViolation(where, f"expected a string, got {_type(value)}")
        if len(value) > MAX_STR:
            raise SchemaViolation(where, f"string of {len(value)} characters (at most {MAX_STR})")
        if spec.choices and value not in spec.choices:
            raise SchemaViolation(where, f"{value!r} is not one of {list(spec.choices)}")
        if spec.pattern is not None and not spec.pattern.match(value):
            raise SchemaViolation(where, f"{value[:80]!r} is not well formed")
    elif isinstance(spec, Bool):
        if not isinstance(value, bool):
            raise SchemaViolation(where, f"expected true or false, got {_type(value)}")
    elif isinstance(spec, Null):
        if value is not None:
            raise SchemaViolation(where, f"expected null, got {_type(value)}")
    elif isinstance(spec, List):
        if not isinstance(value, list):
            raise SchemaViolation(where, f"expected a list, got {_type(value)}")
        if not spec.min_len <= len(value) <= spec.max_len:
            raise SchemaViolation(where, f"list of {len(value)} items (expected {spec.min_len}..{spec.max_len})")
        for i, v in enumerate(value):
            check(v, spec.item, f"{where}[{i}]")
    elif isinstance(spec, Map):
        if not isinstance(value, dict):
            raise SchemaViolation(where, f"expected an object, got {_type(value)}")
        for k, v in value.items():
            check(v, spec.value, f"{where}.{k}" if where else k)
    elif isinstance(spec, Obj):
        if not isinstance(value, dict):
            raise SchemaViolation(where, f"expected an object, got {_type(value)}")
        for k, s in spec.required.items():
            if k not in value:
                raise SchemaViolation(f"{where}.{k}" if where else k, "missing")
            check(value[k], s, f"{where}.{k}" if where else k)
        for k, s in spec.optional.items():
            if k in value:
                check(value[k], s, f"{where}.{k}" if where else k)
        if not spec.extra:
            unknown = sorted(set(value) - set(spec.required) - set(spec.optional))
            if unknown:
                raise SchemaViolation(f"{where}.{unknown[0]}" if where else unknown[0], "unknown field")
    else:  # pragma: no cover - a schema bug
        raise TypeError(f"bad schema node {spec!r}")


def check_manifest(m) -> None:
    check(m, MANIFEST)


# ---- parsing ----------------------------------------------------------------------------------------
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def nesting_depth(raw: bytes) -> int:
    """Deepest [ / { nesting outside strings, computed without recursion."""
    brackets = _STRINGS.sub(b"", raw).translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    a = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where((a == ord("[")) | (a == ord("{")), 1, -1)
    return int(np.cumsum(steps).max())


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise SchemaViolation(k, "appears twice in one object (duplicate JSON key)")
        out[k] = v
    return out


def parse_manifest(raw: bytes):
    """UTF-8 JSON → Python values; duplicate keys and nesting deeper than MAX_DEPTH refused. The dialect is Python's:
    float attributes may be Infinity/-Infinity/NaN (an attention mask's -inf), as `json.dumps` writes them."""
    depth = nesting_depth(raw)
    if depth > MAX_DEPTH:
        raise SchemaViolation("", f"JSON nested {depth} levels deep (at most {MAX_DEPTH})")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SchemaViolation("", f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as e:
        raise SchemaViolation("", f"not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except RecursionError:      # cannot happen below MAX_DEPTH; kept as a clean error, not a crash
        raise SchemaViolation("", "JSON nested too deeply") from None
