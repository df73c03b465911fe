"""Cross-checks of an engine manifest: the parts of its schema that relate one field to another.

Entry points: `check_references(m, blobs)` (on the parsed manifest and the safetensors weights, before any
object is built) and `check_inference(engine)` (after: each layer's declared output dtypes and static dims against
what its OpSpec infers on meta tensors). Both raise `SchemaViolation(field, message)`. Checked here:
dtype names; every tensor defined once, before use; engine inputs/outputs against `tensors`; profiles
(min ≤ opt ≤ max, rank and static dims of the input, element count bounded); each constant present in the
weights with the declared dtype and shape; tensor-valued attributes present; ops known; attributes against the
op's attribute schema (names, required, kinds); plugin records against the layers that use them.
Nothing runs for real: inference uses meta tensors only. Imports ir, util only.
"""

import math

import torch

from ..ir import dtype_from_name, get_spec, has_spec
from ..ir import dynamic
from ..ir.opspec import REQUIRED
from .schema import MAX_DEPTH, MAX_ELEMENTS, SchemaViolation

PLUGIN_PREFIX = "plugin:"
_OPAQUE = {"If", "Loop", "Scan", "SequenceMap",      # bodies run at run time; not inferred here
           "RNN", "GRU", "LSTM", "LinearAttention", "CausalConvWithState"}   # references step through time


def _dtype(name, where):
    if name is None:
        return None
    try:
        return dtype_from_name(name)
    except ValueError:
        raise SchemaViolation(where, f"unknown dtype {name!r}") from None


def _numel(shape, where):
    n = 1
    for d in shape or ():
        if isinstance(d, int) and d > 0:
            n *= d
    if n > MAX_ELEMENTS:
        raise SchemaViolation(where, f"{n} elements (at most {MAX_ELEMENTS})")
    return n


def _infos(items, where):
    out = {}
    for i, t in enumerate(items):
        w = f"{where}[{i}]"
        if t["name"] in out:
            raise SchemaViolation(f"{w}.name", f"tensor {t['name']!r} is listed twice")
        _dtype(t["dtype"], f"{w}.dtype")
        _numel(t["shape"], f"{w}.shape")
        out[t["name"]] = t
    return out


# ---- attributes ---------------------------------------------------------------------------------------
def _attr_value(v, blobs, where, depth=0):
    """Walk an encoded attribute: {"$tensor": key} must name a weight, {"$network": …} a well-formed body."""
    if depth > MAX_DEPTH:
        raise SchemaViolation(where, "nested too deeply")
    if isinstance(v, bool) or v is None or isinstance(v, (float, str)):
        return
    if isinstance(v, int):
        if not -(2**63) <= v < 2**63:
            raise SchemaViolation(where, f"integer {v} does not fit in 64 bits")
        return
    if isinstance(v, list):
        for i, x in enumerate(v):
            _attr_value(x, blobs, f"{where}[{i}]", depth + 1)
        return
    if len(v) != 1 or next(iter(v)) not in ("$tensor", "$dict", "$network"):
        raise SchemaViolation(where, f"an attribute object must be one of $tensor/$dict/$network, got keys {sorted(v)[:4]}")
    kind, body = next(iter(v.items()))
    if kind == "$tensor":
        if not isinstance(body, str) or body not in blobs:
            raise SchemaViolation(where, f"names weight {body!r}, which the weights do not hold")
    elif kind == "$dict":
        if not isinstance(body, dict):
            raise SchemaViolation(where, "$dict must hold an object")
        for k, x in body.items():
            _attr_value(x, blobs, f"{where}.{k}", depth + 1)
    else:
        _body(body, blobs, where, depth + 1)


def _kind_ok(default, value) -> bool:
    if default is None or default is REQUIRED:
        return True
    if isinstance(default, bool) or isinstance(default, int):
        return isinstance(value, (bool, int))
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, str):
        return isinstance(value, str)
    if isinstance(default, (list, tuple)):
        return isinstance(value, list)
    return True


def _attrs(layer, blobs, where, depth=0):
    attrs = layer["attrs"]
    for k, v in attrs.items():
        _attr_value(v, blobs, f"{where}.attrs.{k}", depth)
    if layer["op"].startswith(PLUGIN_PREFIX) or not has_spec(layer["op"]):
        return     # plugin ops: the plugin's identity is checked at load (plugin/records.py), then its inference
    schema = get_spec(layer["op"]).attrs
    unknown = sorted(set(attrs) - set(schema))
    if unknown:
        raise SchemaViolation(f"{where}.attrs.{unknown[0]}", f"op {layer['op']} has no such attribute")
    for k, default in schema.items():
        if k not in attrs:
            if default is REQUIRED:
                raise SchemaViolation(f"{where}.attrs.{k}", f"op {layer['op']} needs this attribute")
        elif not _kind_ok(default, attrs[k]) and not (isinstance(attrs[k], dict) and "$tensor" in attrs[k]):
            raise SchemaViolation(f"{where}.attrs.{k}", f"op {layer['op']} expects a value like {default!r}, "
                                  f"got {type(attrs[k]).__name__}")


def _op(op, where):
    if not isinstance(op, str) or not (has_spec(op) or op.startswith(PLUGIN_PREFIX)):
        raise SchemaViolation(where, f"unknown op {op!r}")


def _body(net, blobs, where, depth):
    """A control-flow body: same shape as the engine's layers, may read its enclosing scope's tensors."""
    if not isinstance(net, dict) or not {"name", "inputs", "outputs", "constants", "layers", "tensors"} <= set(net):
        raise SchemaViolation(where, "$network must hold name, inputs, outputs, constants, layers, tensors")
    for key in ("inputs", "outputs"):
        if not isinstance(net[key], list) or not all(isinstance(x, str) for x in net[key]):
            raise SchemaViolation(f"{where}.{key}", "expected a list of names")
    if not isinstance(net["constants"], dict) or not all(isinstance(k, str) and k in blobs
                                                         for k in net["constants"].values()):
        raise SchemaViolation(f"{where}.constants", "expected names of weights the file holds")
    if not isinstance(net["tensors"], list) or not all(isinstance(t, dict) and {"name", "dtype", "shape"} <= set(t)
                                                      for t in net["tensors"]):
        raise SchemaViolation(f"{where}.tensors", "expected a list of {name, dtype, shape}")
    _infos(net["tensors"], f"{where}.tensors")
    if not isinstance(net["layers"], list):
        raise SchemaViolation(f"{where}.layers", "expected a list")
    for i, la in enumerate(net["layers"]):
        w = f"{where}.layers[{i}]"
        if not isinstance(la, dict) or not {"name", "op", "inputs", "outputs", "attrs", "origin"} <= set(la):
            raise SchemaViolation(w, "a layer needs name, op, inputs, outputs, attrs, origin")
        if not all(isinstance(x, list) and all(isinstance(s, str) for s in x) for x in (la["inputs"], la["outputs"])):
            raise SchemaViolation(w, "inputs and outputs must be lists of names")
        if not isinstance(la["attrs"], dict) or not isinstance(la["name"], str):
            raise SchemaViolation(w, "attrs must be an object and name a string")
        _op(la["op"], f"{w}.op")
        _attrs(la, blobs, w, depth)


# ---- the whole manifest ---------------------------------------------------------------------------------
def _same_info(a, b, where):
    if a["dtype"] != b["dtype"] or a["shape"] != b["shape"]:
        raise SchemaViolation(where, f"declares {a['dtype']}{a['shape']} but tensors has {b['dtype']}{b['shape']}")


def _profiles(m, inputs):
    dynamic = [n for n, t in inputs.items() if t["shape"] is not None
               and any(not isinstance(d, int) or d < 0 for d in t["shape"])]
    if inputs and not m["profiles"]:        # the builder writes one even for static inputs; the runtime picks one
        raise SchemaViolation("profiles", "the engine has inputs but no optimization profile")
    for n in dynamic:
        for p, prof in enumerate(m["profiles"]):
            if n not in prof:
                raise SchemaViolation(f"profiles[{p}]", f"has no range for the dynamic input {n!r}")
    for p, prof in enumerate(m["profiles"]):
        for name, (lo, opt, hi) in prof.items():
            w = f"profiles[{p}].{name}"
            if name not in inputs:
                raise SchemaViolation(w, "is not an input of the engine")
            shape = inputs[name]["shape"]
            if shape is not None and not len(lo) == len(opt) == len(hi) == len(shape):
                raise SchemaViolation(w, f"min/opt/max ranks {len(lo)}/{len(opt)}/{len(hi)} do not match the "
                                      f"input's rank {len(shape)}")
            if not len(lo) == len(opt) == len(hi):
                raise SchemaViolation(w, "min, opt and max have different ranks")
            for k, (a, b, c) in enumerate(zip(lo, opt, hi)):
                if not a <= b <= c:
                    raise SchemaViolation(w, f"dimension {k}: min {a} ≤ opt {b} ≤ max {c} does not hold")
                if shape is not None and isinstance(shape[k], int) and shape[k] >= 0 and not a == c == shape[k]:
                    raise SchemaViolation(w, f"dimension {k} is static ({shape[k]}) but the profile gives {a}..{c}")
            if math.prod(hi) > MAX_ELEMENTS:
                raise SchemaViolation(w, f"max shape has {math.prod(hi)} elements (at most {MAX_ELEMENTS})")


def check_references(m: dict, blobs: dict) -> None:
    tensors = _infos(m["tensors"], "tensors")
    ios = {}
    for key in ("inputs", "outputs"):
        ios[key] = _infos(m[key], key)
        for i, t in enumerate(m[key]):
            if t["name"] not in tensors:
                raise SchemaViolation(f"{key}[{i}].name", f"{t['name']!r} has no entry in tensors")
            _same_info(t, tensors[t["name"]], f"{key}[{i}]")
    _profiles(m, ios["inputs"])
    defined = set(ios["inputs"])
    for i, name in enumerate(m["constants"]):
        w = f"constants[{i}]"
        if name in defined:
            raise SchemaViolation(w, f"{name!r} is defined twice")
        if name not in blobs:
            raise SchemaViolation(w, f"{name!r} is not in the weights")
        t = blobs[name]
        if name in tensors:
            info = tensors[name]
            if info["dtype"] is not None and _dtype(info["dtype"], "") != t.dtype:
                raise SchemaViolation(w, f"{name!r}: the weights hold {t.dtype}, tensors declares {info['dtype']}")
            if info["shape"] is not None and list(t.shape) != info["shape"]:
                raise SchemaViolation(w, f"{name!r}: the weights hold shape {list(t.shape)}, tensors declares "
                                      f"{info['shape']}")
        defined.add(name)
    layer_names, plugin_ops = set(), {}
    for i, la in enumerate(m["layers"]):
        w = f"layers[{i}]"
        if la["name"] in layer_names:
            raise SchemaViolation(f"{w}.name", f"layer {la['name']!r} is listed twice")
        layer_names.add(la["name"])
        _op(la["op"], f"{w}.op")
        if la["op"].startswith(PLUGIN_PREFIX):
            plugin_ops.setdefault(la["op"], []).append(la["name"])
        for k, name in enumerate(la["inputs"]):
            if name and name not in defined:
                raise SchemaViolation(f"{w}.inputs[{k}]", f"{name!r} is not produced before layer {la['name']!r}")
        for k, name in enumerate(la["outputs"]):
            if not name:
                continue
            if name in defined:
                raise SchemaViolation(f"{w}.outputs[{k}]", f"{name!r} is produced twice")
            defined.add(name)
        _attrs(la, blobs, w)
    for i, t in enumerate(m["outputs"]):
        if t["name"] not in defined:
            raise SchemaViolation(f"outputs[{i}].name", f"{t['name']!r} is never produced")
    _plugin_records(m["plugins"], plugin_ops)


def _plugin_records(records, plugin_ops):
    seen = set()
    for i, r in enumerate(records):
        w = f"plugins[{i}]"
        expect = f"{PLUGIN_PREFIX}{r['id']}:{r['version']}".replace(".", "_")
        if r["op"] != expect:
            raise SchemaViolation(f"{w}.op", f"{r['op']!r} does not match id {r['id']!r} version {r['version']!r}")
        if (f"{r['namespace']}::{r['name']}" if r["namespace"] else r["name"]) != r["id"]:
            raise SchemaViolation(f"{w}.id", f"{r['id']!r} does not match namespace and name")
        if r["op"] in seen:
            raise SchemaViolation(f"{w}.op", f"plugin {r['op']!r} has two records")
        seen.add(r["op"])
        users = set(plugin_ops.get(r["op"], ()))
        for k, u in enumerate(r["layers"]):
            if u["name"] not in users:
                raise SchemaViolation(f"{w}.layers[{k}].name", f"no layer {u['name']!r} uses {r['op']}")


# ---- inference ------------------------------------------------------------------------------------------
def _stand_in(info, sizes: dict | None = None) -> torch.Tensor:
    """A meta tensor for a declared TensorInfo: dynamic dims become 1 (shape then uncertain)."""
    shape = info.shape if info.shape is not None else ()
    dims = tuple(d if isinstance(d, int) and d >= 0 else 1 for d in shape)
    return torch.empty(dims, dtype=info.dtype or torch.float32, device="meta")


def _certain(info) -> bool:
    return info.dtype is not None and info.is_static


def _chain_infer(layer, ins):
    """PointwiseChain outputs from its program alone: each step broadcasts its arguments' shapes, each output has its
    recorded dtype. (Evaluating the steps on meta tensors would import torch._dynamo through the GELU/erf
    decompositions: +1.3 s on every engine load.)"""
    a = layer.attrs
    shapes = {f"in{i}": tuple(t.shape) for i, t in enumerate(ins) if t is not None}
    shapes.update({f"c{i}": tuple(c["shape"]) for i, c in enumerate(a["consts"])})
    for k, step in enumerate(a["steps"]):
        shapes[f"s{k}"] = torch.broadcast_shapes(*[shapes[x] for x in step["args"] if x])
    return [torch.empty(shapes[r], dtype=dtype_from_name(d), device="meta")
            for r, d in zip(a["outputs"], a["out_dtypes"])]


def _infer(spec, layer, ins):
    if layer.op == "PointwiseChain" and not any(dynamic.placeholder_info(t) for t in ins if t is not None):
        return _chain_infer(layer, ins)
    with torch.device("meta"), dynamic.value_guard():
        if spec.infer is not None:
            result = spec.infer(*ins, **layer.attrs)
        else:
            result = spec.reference(*ins, **layer.attrs)
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    if len(outs) < len(layer.outputs):
        raise ValueError(f"the op yields {len(outs)} outputs, the layer lists {len(layer.outputs)}")
    return outs


def check_inference(engine) -> None:
    """Each layer's declared outputs against its op's inference, on meta tensors at the first profile's opt shapes.

    A tensor is *certain* when its dtype and shape are exactly known here; a layer fed only certain tensors must
    infer without error, and its outputs must match the declared dtype and static dims. Shapes that depend on
    run-time values (a Reshape's shape input, data-dependent ops) make the outputs uncertain: their dtypes are
    still compared, their shapes are not."""
    opt = {k: v[1] for k, v in engine.profiles[0].items()} if engine.profiles else {}
    env, certain = {}, set()
    unknown_dtype = set()       # stand-ins for tensors declared without a dtype: what they feed has no dtype to check
    for t in engine.inputs:
        if t.dtype is None:
            unknown_dtype.add(t.name)
        if t.name in opt and t.dtype is not None:
            env[t.name] = torch.empty(opt[t.name], dtype=t.dtype, device="meta")
            certain.add(t.name)
        else:
            env[t.name] = _stand_in(t)
            certain.update([t.name] if _certain(t) else [])
    for name, value in engine.constants.items():
        env[name] = torch.empty(value.shape, dtype=value.dtype, device="meta")
        certain.add(name)
    for i, layer in enumerate(engine.layers):
        declared = [engine.tensors.get(o) for o in layer.outputs]
        sure = all(not n or n in certain for n in layer.inputs)
        dtype_sure = not any(n in unknown_dtype for n in layer.inputs if n)
        outs = None
        if layer.op not in _OPAQUE and has_spec(layer.op):
            ins = [env.get(n) if n else None for n in layer.inputs]
            try:
                outs = _infer(get_spec(layer.op), layer, ins)
            except dynamic.ValueNeeded:
                outs, sure = None, False
            except Exception as e:  # noqa: BLE001 - the layer's data does not fit its op
                if sure:
                    raise SchemaViolation(f"layers[{i}]", f"layer {layer.name!r} ({layer.op}) does not accept its "
                                          f"inputs and attributes: {type(e).__name__}: {str(e)[:200]}") from None
                outs = None
        else:
            sure = False
        for k, name in enumerate(layer.outputs):
            if not name:
                continue
            info = declared[k]
            out = outs[k] if outs is not None and k < len(outs) else None
            ph = dynamic.placeholder_info(out) if isinstance(out, torch.Tensor) else None
            if isinstance(out, torch.Tensor) and info is not None and info.dtype is not None and dtype_sure and \
                    (ph is None or ph.dtype_known) and out.dtype != info.dtype:
                raise SchemaViolation(f"layers[{i}].outputs[{k}]", f"{name!r} is declared {info.describe()} but "
                                      f"{layer.op} yields {str(out.dtype).replace('torch.', '')}")
            exact = sure and isinstance(out, torch.Tensor) and ph is None
            if exact and info is not None and info.shape is not None:
                got = tuple(out.shape)
                if len(got) != len(info.shape) or any(isinstance(d, int) and d >= 0 and d != g
                                                      for d, g in zip(info.shape, got)):
                    raise SchemaViolation(f"layers[{i}].outputs[{k}]", f"{name!r} is declared {info.describe()} but "
                                          f"{layer.op} yields shape {list(got)}")
            if exact:
                env[name] = torch.empty(out.shape, dtype=out.dtype, device="meta")
                certain.add(name)
            else:
                env[name] = _stand_in(info) if info is not None else None
                if info is None or info.dtype is None:
                    unknown_dtype.add(name)
