"""Run a network's reference implementations: shape/dtype propagation and constant evaluation.

`propagate(net, shapes)` walks the layers once with
- network inputs as *meta* tensors of the given shapes (no memory, no compute),
- constants as real CPU tensors.
A layer whose inputs are all real runs for real (this is constant folding, and it is how shape
arithmetic such as Shape → Gather → Concat → Reshape gets concrete values); any other layer runs its
reference on meta tensors, which yields exact output shapes and dtypes at the cost of no compute;
inputs listed in the op's `value_inputs` (shape, axes, pads …) stay real there when their value is known.
The result maps every tensor name to a tensor: meta (value unknown) or real (value known).

Memory traffic: none on the device; real evaluation touches only constants and small int tensors
(capped at `max_fold_elements` per output; larger outputs are kept as meta and computed at run time).
"""

from typing import Callable

import torch

from . import dynamic
from .layer import Layer
from .network import Network
from .opspec import get_spec


class InferenceFailure(Exception):
    """A layer's reference could not run on its (meta) inputs; `layer` names it."""

    def __init__(self, layer: Layer, cause: Exception):
        self.layer, self.cause = layer, cause
        super().__init__(f"layer {layer.name!r} (op {layer.op}): {type(cause).__name__}: {cause}")


def as_outputs(result, count: int) -> list[torch.Tensor]:
    """Normalise a reference's return value (tensor or tuple/list) to a list of `count` tensors."""
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    if len(outs) < count:
        raise ValueError(f"reference returned {len(outs)} outputs, layer declares {count}")
    return outs[:count]


def run_reference(layer: Layer, inputs: list[torch.Tensor | None]) -> list[torch.Tensor]:
    spec = get_spec(layer.op)
    return as_outputs(spec.reference(*inputs, **layer.attrs), len(layer.outputs))


def _is_real(t) -> bool:
    return t is None or t.device.type != "meta"


def _to_meta(t):
    return t if t is None or t.device.type == "meta" else t.to("meta")


_MEMO: dict = {}          # (op, attrs, inputs) → output (shape, stride, dtype): see _memo_key
_MEMO_LIMIT = 8192
_SMALL = 64              # value inputs and tensor attributes up to this many elements are keyed by value


def _freeze(v):
    """A hashable image of an attribute value, or raise TypeError when it has none worth keying."""
    if isinstance(v, torch.Tensor):
        if v.device.type == "meta" or v.numel() > _SMALL:
            raise TypeError("large tensor attribute")
        return ("tensor", str(v.dtype), tuple(v.shape), tuple(v.flatten().tolist()))
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise TypeError(type(v).__name__)


def _memo_key(spec, layer: Layer, meta: list):
    """Shape inference of a layer depends only on its op, attributes, and its inputs' shapes, strides and dtypes
    (and the values of small value inputs): repeated blocks of a network (ResNet stages, transformer layers) and
    the several profile points of one build then cost one reference call per distinct question."""
    try:
        parts = []
        for t in meta:
            if t is None:
                parts.append(None)
            elif not isinstance(t, torch.Tensor):
                return None
            elif t.device.type == "meta":
                parts.append(("m", tuple(t.shape), tuple(t.stride()), str(t.dtype)))
            elif t.numel() <= _SMALL:
                parts.append(("v", tuple(t.shape), str(t.dtype), tuple(t.flatten().tolist())))
            else:
                return None
        return (spec.name, id(spec), _freeze(layer.attrs), len(layer.outputs), tuple(parts))
    except TypeError:
        return None


def clear_memo() -> None:
    """Forget memoised shape questions (the builder starts every build with an empty memo, so one build never
    profits from another's work and build times stay honest)."""
    _MEMO.clear()


def _meta_eval(spec, layer: Layer, ins: list) -> list:
    """The reference on meta inputs (value inputs stay real). Reading a value that is only known at run
    time, or reading a placeholder, yields placeholder outputs (see dynamic.py) instead of a failure.
    Results of plain (placeholder-free) layers are memoised by `_memo_key`."""
    n = len(layer.outputs)
    phs = [dynamic.placeholder_info(t) for t in ins]
    meta = [t if i in spec.value_inputs else _to_meta(t) for i, t in enumerate(ins)]  # values stay real
    key = None if any(phs) else _memo_key(spec, layer, meta)
    if key is not None and key in _MEMO:
        return [None if d is None else torch.empty_strided(d[0], d[1], dtype=d[2], device="meta") for d in _MEMO[key]]
    outs = _meta_eval_uncached(spec, layer, ins, meta, phs, n)
    if key is not None and all(o is None or (type(o) is torch.Tensor and o.device.type == "meta"
                                             and dynamic.placeholder_info(o) is None) for o in outs):
        if len(_MEMO) >= _MEMO_LIMIT:
            _MEMO.clear()
        _MEMO[key] = [None if o is None else (tuple(o.shape), tuple(o.stride()), o.dtype) for o in outs]
    return outs


def _meta_eval_uncached(spec, layer: Layer, ins: list, meta: list, phs: list, n: int) -> list:
    try:
        with dynamic.value_guard():
            outs = as_outputs(spec.reference(*meta, **layer.attrs), n)
    except dynamic.ValueNeeded:
        return [dynamic.unknown() for _ in range(n)]
    except Exception:  # noqa: BLE001 - a placeholder's stand-in dims may not fit; a true error re-raises
        if any(phs):
            return [dynamic.unknown() for _ in range(n)]
        raise
    if not any(phs):
        return outs
    if any(p is not None and not p.rank_known for p in phs):   # rank unknown in → rank unknown out
        return [o if o is None else dynamic.like(o) if any(o is t for t in ins) else dynamic.unknown() for o in outs]
    return [o if o is None else dynamic.like(o) for o in outs]


def propagate(net: Network, input_shapes: dict[str, tuple[int, ...]], max_fold_elements: int = 1 << 24,
              on_layer: Callable[[Layer, list, list], None] | None = None) -> dict[str, torch.Tensor]:
    """Return name → tensor (meta or real) for every tensor of `net` at the given input shapes."""
    env: dict[str, torch.Tensor] = {}
    for name in net.inputs:
        info = net.tensors[name]
        env[name] = torch.empty(input_shapes[name], dtype=info.dtype, device="meta")
    env.update(net.constants)
    for layer in net.layers:
        spec = get_spec(layer.op)
        ins = [env[i] if i else None for i in layer.inputs]
        try:
            if spec.infer is not None:
                outs = as_outputs(spec.infer(*ins, **layer.attrs), len(layer.outputs))
            elif all(_is_real(t) for t in ins) and spec.host_ok:
                outs = as_outputs(spec.reference(*ins, **layer.attrs), len(layer.outputs))
                outs = [o if o.numel() <= max_fold_elements else o.to("meta") for o in outs]
            else:
                outs = _meta_eval(spec, layer, ins)
        except Exception as e:  # noqa: BLE001 - re-raised with the layer named
            raise InferenceFailure(layer, e) from e
        for name, t in zip(layer.outputs, outs):
            if name:
                env[name] = t
        if on_layer is not None:
            on_layer(layer, ins, outs)
    return env
