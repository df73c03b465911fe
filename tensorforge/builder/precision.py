"""Reduced precision: each float layer computes in the dtype chosen for it, with casts where dtypes meet.

Entry points: `apply_precision(net, plan, output_dtypes, point)` (the builder) and `convert_precision(net, half,
output_dtypes)` (everything in `half`). A `PrecisionPlan` gives the default compute dtype of float layers (float32,
float16 or bfloat16), per-layer compute dtypes (--layerPrecisions, resolved to layer names by precision_spec.py)
and per-layer output dtypes (--layerOutputTypes). Rules, in order:
- a layer's own constraint wins; then the model's fp32 islands: a Cast(to=float32) of a float16/bfloat16 tensor
  is the model asking for float32, so it and every float layer downstream of it (until the next Cast) stay
  float32 in every mode; every other float32 layer takes the default, and the model's own float16/bfloat16
  layers keep their dtype;
- Cast(to=float32) in a reduced-precision layer (of an int, bool or fp8 tensor) casts to that layer's dtype;
- float constants are converted to the dtype of their readers (copied when readers disagree); Q/DQ scales keep
  float32 (a DequantizeLinear in a reduced layer writes its dtype through `output_dtype`, a quantized layer with a
  float output through `y_dtype`; their float inputs — bias, residual — are read as they are);
- network inputs and outputs keep their declared dtypes: a Cast is inserted at each boundary.
Casts are then inserted wherever a tensor's dtype differs from its reader's compute dtype, to a fixed point (dtypes
found by shape/dtype propagation). Memory traffic: halves every activation and weight read of converted layers.
"""

from dataclasses import dataclass, field

import torch

from ..ir import Layer, Network, TensorInfo, dtype_name, get_spec
from ..ir.interpret import InferenceFailure, propagate

CONVERTIBLE = (torch.float32, torch.float16, torch.bfloat16)
_QUANTIZED = {"QuantizedConv", "QuantizedConvTranspose", "QuantizedMatMul"}    # read their float inputs as float32
_NO_INPUT_CASTS = {"Cast", "CastLike", "QuantizeLinear", "DequantizeLinear", "Identity", *_QUANTIZED}


@dataclass
class PrecisionPlan:
    default: torch.dtype = torch.float32
    layers: dict[str, torch.dtype] = field(default_factory=dict)          # layer name → compute dtype
    outputs: dict[str, list[torch.dtype | None]] = field(default_factory=dict)   # layer name → per-output dtype


@dataclass
class PrecisionReport:
    constants_converted: int = 0
    casts_inserted: int = 0
    unmet: list[tuple[str, str]] = field(default_factory=list)           # (layer name, why)


def _float(t) -> bool:
    return isinstance(t, torch.Tensor) and t.dtype in CONVERTIBLE


def _islands(net: Network, env: dict) -> set[str]:
    """Tensors of the model's own fp32 islands: downstream of Cast(to=float32) of a float16/bfloat16 tensor."""
    island: set[str] = set()
    for layer in net.layers:
        ins = [env.get(i) for i in layer.inputs if i]
        if layer.op == "Cast":
            src = env.get(layer.inputs[0]) if layer.inputs else None
            upcast = layer.attrs.get("to") == "float32" and src is not None and src.dtype in (torch.float16, torch.bfloat16)
            if upcast or (layer.attrs.get("to") == "float32" and layer.inputs[0] in island):
                island.update(o for o in layer.outputs if o)
            continue
        if any(layer.inputs[k] in island for k in range(len(layer.inputs)) if layer.inputs[k]) and ins:
            island.update(o for o in layer.outputs if o and _float(env.get(o)))
    return island


def _compute_dtypes(net: Network, plan: PrecisionPlan, env: dict, island: set[str]) -> dict[str, torch.dtype]:
    out: dict[str, torch.dtype] = {}
    consumers = net.consumers()
    for layer in net.layers:
        tensors = [env.get(i) for i in layer.inputs if i] + [env.get(o) for o in layer.outputs if o]
        if any(isinstance(t, torch.Tensor) and t.dtype == torch.float64 for t in tensors):
            continue
        float_outs = [env[o].dtype for o in layer.outputs if o and _float(env.get(o))]
        if not float_outs:
            continue
        if layer.name in plan.layers:
            out[layer.name] = plan.layers[layer.name]
        elif any(o in island for o in layer.outputs):
            out[layer.name] = torch.float32
        elif float_outs[0] == torch.float32:
            out[layer.name] = plan.default
        else:                    # the model's own float16/bfloat16 layers keep their dtype
            out[layer.name] = float_outs[0]
    for layer in net.layers:      # a DequantizeLinear writes what all its readers compute in
        if layer.op == "DequantizeLinear" and layer.name not in plan.layers and layer.outputs[0] in consumers:
            wants = {out.get(c.name) for c in consumers[layer.outputs[0]]}
            if len(wants) == 1 and None not in wants:
                out[layer.name] = wants.pop()
    return out


def _castable_inputs(layer: Layer) -> list[int]:
    if layer.op in _NO_INPUT_CASTS:
        return []
    skip = set(get_spec(layer.op).value_inputs)
    if layer.op == "Resize":
        skip |= {1, 2}
    return [k for k, i in enumerate(layer.inputs) if i and k not in skip]


def _convert_constants(net: Network, dtypes: dict[str, torch.dtype], report: PrecisionReport) -> None:
    wants: dict[str, set] = {}
    readers: dict[str, list[tuple[Layer, int]]] = {}
    for layer in net.layers:
        p = dtypes.get(layer.name)
        for k in _castable_inputs(layer):
            name = layer.inputs[k]
            if p is not None and name in net.constants and net.constants[name].dtype in CONVERTIBLE:
                wants.setdefault(name, set()).add(p)
                readers.setdefault(name, []).append((layer, k))
    for name, ps in wants.items():
        value = net.constants[name]
        if len(ps) == 1:
            p = next(iter(ps))
            if value.dtype != p:
                net.add_constant(name, value.to(p))
                report.constants_converted += 1
            continue
        copies = {}
        for layer, k in readers[name]:
            p = dtypes[layer.name]
            if p == value.dtype:
                continue
            if p not in copies:
                copies[p] = net.add_constant(net.unique_name(f"{name}/{dtype_name(p)}"), value.to(p))
                report.constants_converted += 1
            layer.inputs[k] = copies[p]


def _rewrite_casts(net: Network, dtypes: dict[str, torch.dtype], env: dict, island: set[str]) -> None:
    for layer in net.layers:
        p = dtypes.get(layer.name)
        if layer.op == "Cast" and layer.attrs.get("to") == "float32" and p is not None and p != torch.float32 \
                and layer.outputs[0] not in island:
            layer.attrs["to"] = dtype_name(p)
        if layer.op == "DequantizeLinear" and p is not None and p != torch.float32:
            layer.attrs["output_dtype"] = dtype_name(p)
        if layer.op in _QUANTIZED and p is not None and p != torch.float32 and not layer.attrs.get("y_scale") \
                and layer.attrs.get("y_dtype") == "float32":      # a float output: written in the layer's dtype
            layer.attrs["y_dtype"] = dtype_name(p)


def _output_types(net: Network, plan: PrecisionPlan, env: dict, report: PrecisionReport) -> list[Layer]:
    """--layerOutputTypes: a Cast after the layer gives the output its asked-for dtype (the readers then cast)."""
    added = []
    for layer in list(net.layers):
        for j, want in enumerate(plan.outputs.get(layer.name, [])):
            if want is None or j >= len(layer.outputs) or not layer.outputs[j]:
                continue
            name = layer.outputs[j]
            have = env.get(name)
            if not _float(have) or want not in CONVERTIBLE:
                report.unmet.append((layer.name, f"output {j} ({name!r}) is {dtype_name(have.dtype) if isinstance(have, torch.Tensor) else 'unknown'}"
                                                 f", it cannot be given type {dtype_name(want)}"))
                continue
            inner = net.unique_name(f"{name}/computed")
            net.tensors[inner] = TensorInfo(inner)
            layer.outputs[j] = inner
            cast = Layer(f"{name}/to_{dtype_name(want)}", "Cast", [inner], [name], {"to": dtype_name(want)},
                         list(layer.origin), precision=dtype_name(want))
            net.layers.insert(net.layers.index(layer) + 1, cast)
            added.append(cast)
    return added


def _propagate_until_failure(net: Network, point: dict, max_fold: int):
    """(env, None) for the whole network, or (env of the layers before the first failing one, its InferenceFailure):
    after the constants of an fp16 layer are converted, its float32 activation input cannot be evaluated with them
    until the cast is in place, so the casts of that layer are judged on the tensors before it."""
    env = {name: torch.empty(point[name], dtype=net.tensors[name].dtype, device="meta") for name in net.inputs}
    env.update(net.constants)

    def seen(layer, ins, outs):
        env.update((n, t) for n, t in zip(layer.outputs, outs) if n)
    try:
        return propagate(net, point, max_fold, on_layer=seen), None
    except InferenceFailure as e:
        return env, e


def _fix_inputs(net: Network, dtypes: dict[str, torch.dtype], point: dict, max_fold: int, report: PrecisionReport):
    made: dict[tuple[str, torch.dtype], str] = {}
    for _ in range(len(net.layers) + 64):
        env, failed = _propagate_until_failure(net, point, max_fold)
        pending: list[tuple[Layer, int, torch.dtype]] = []
        dirty: set[str] = set()      # outputs whose dtype changes with this round's casts: judged next round
        deferred = set()             # layers judged next round (an input's dtype changes with this round's casts)
        for layer in net.layers:
            if any(i in dirty for i in layer.inputs if i):
                dirty.update(o for o in layer.outputs if o)
                deferred.add(id(layer))
                continue
            p = dtypes.get(layer.name)
            floats = [k for k in _castable_inputs(layer) if _float(env.get(layer.inputs[k]))]
            if p is None:        # a layer with no float output (compare, ArgMax, ...): only unify mixed inputs
                kinds = {env[layer.inputs[k]].dtype for k in floats}
                p = torch.float32 if len(kinds) > 1 else None
            fixes = [k for k in (floats if p is not None else []) if env[layer.inputs[k]].dtype != p]
            pending.extend((layer, k, p) for k in fixes)
            if fixes:
                dirty.update(o for o in layer.outputs if o)
        if failed is not None and id(failed.layer) not in deferred and \
                not any(layer is failed.layer for layer, _, _ in pending):
            raise failed                  # not a dtype mismatch that a cast resolves: the layer's own error
        if not pending:
            return env
        for layer, k, p in pending:
            src = layer.inputs[k]
            key = (src, p)
            if key not in made:
                out = net.unique_name(f"{src}/to_{dtype_name(p)}")
                net.tensors[out] = TensorInfo(out, p)
                cast = Layer(f"{src}/to_{dtype_name(p)}", "Cast", [src], [out], {"to": dtype_name(p)},
                             [src], precision=dtype_name(p))
                net.layers.insert(net.layers.index(layer), cast)
                made[key] = out
                report.casts_inserted += 1
            layer.inputs[k] = made[key]
    raise RuntimeError("precision: casts did not reach a fixed point in 64 rounds")


def _boundary_outputs(net: Network, output_dtypes: dict[str, torch.dtype], env: dict) -> None:
    for name in net.outputs:
        want, have = output_dtypes.get(name), env.get(name)
        if want is None or not isinstance(have, torch.Tensor) or have.dtype == want or name in net.inputs:
            continue
        if want not in CONVERTIBLE or have.dtype not in CONVERTIBLE:
            continue
        producer = next(layer for layer in net.layers if name in layer.outputs)
        inner = net.unique_name(f"{name}/{dtype_name(have.dtype)}")
        producer.outputs = [inner if o == name else o for o in producer.outputs]
        for layer in net.layers:
            layer.inputs = [inner if x == name else x for x in layer.inputs]
        net.tensors[inner] = TensorInfo(inner, have.dtype)
        net.layers.append(Layer(f"{name}/to_{dtype_name(want)}", "Cast", [inner], [name], {"to": dtype_name(want)},
                                [name], precision=dtype_name(want)))


def apply_precision(net: Network, plan: PrecisionPlan, output_dtypes: dict[str, torch.dtype], point: dict,
                    max_fold: int = 1 << 24) -> PrecisionReport:
    """Rewrite `net` in place so every float layer computes in its planned dtype (module docstring)."""
    report = PrecisionReport()
    env = propagate(net, point, max_fold)
    island = _islands(net, env)
    dtypes = _compute_dtypes(net, plan, env, island)
    _rewrite_casts(net, dtypes, env, island)
    _convert_constants(net, dtypes, report)
    for cast in _output_types(net, plan, env, report):
        dtypes.pop(cast.name, None)
    env = _fix_inputs(net, dtypes, point, max_fold, report)
    _boundary_outputs(net, output_dtypes, env)
    for layer in net.layers:
        if layer.name in dtypes:
            layer.precision = dtype_name(dtypes[layer.name])
    return report


def static_point(net: Network) -> dict:
    point = {}
    for name in net.inputs:
        shape = net.tensors[name].shape
        if shape is None or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise ValueError(f"input {name!r} has no static shape: pass a shape point")
        point[name] = tuple(shape)
    return point


def convert_precision(net: Network, half: torch.dtype, output_dtypes: dict[str, torch.dtype],
                      point: dict | None = None) -> int:
    """Every float layer in `half` (the model's fp32 islands excepted); returns the number of constants converted."""
    return apply_precision(net, PrecisionPlan(half), output_dtypes, point or static_point(net)).constants_converted
