"""Common-subexpression removal: equal constants become one, and a layer that repeats an earlier layer
(same op, same inputs, same attributes) is dropped, its readers rewired to the earlier outputs.

Exporters repeat work often: one Constant node per use of 1.0, the same Shape → Gather per attention head,
the same Transpose of a weight in two places. One forward sweep with a hash of (op, inputs, attrs):
O(layers). Random ops and plugins are never merged (two draws are not one), nor is a layer whose output is
a network output (its name must survive). Constants are compared by dtype, shape and bytes, up to
`max_elements` elements (larger weights are rarely duplicated and costly to hash).
"""

import hashlib

import torch

from ..ir import Network

NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli",
                    "Multinomial"}


def _tensor_key(t: torch.Tensor):
    data = t.detach().cpu().contiguous()
    digest = hashlib.sha1(data.reshape(-1).view(torch.uint8).numpy().tobytes() if data.numel() else b"").hexdigest()
    return ("tensor", str(t.dtype), tuple(t.shape), digest)


def _attr_key(v):
    if isinstance(v, torch.Tensor):
        return _tensor_key(v)
    if isinstance(v, (list, tuple)):
        return ("list", tuple(_attr_key(x) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple(sorted((k, _attr_key(x)) for k, x in v.items())))
    if isinstance(v, float) and v != v:
        return ("nan",)
    return (type(v).__name__, v)


def _mergeable(op: str) -> bool:
    return op not in NONDETERMINISTIC and "::" not in op and not op.startswith("plugin")


def eliminate_common_subexpressions(net: Network, max_elements: int = 1 << 16, **_) -> int:
    outputs = set(net.outputs)
    rename: dict[str, str] = {}
    first_const: dict[tuple, str] = {}
    for name, value in net.constants.items():
        if value.numel() > max_elements or name in outputs:
            continue
        key = _tensor_key(value)
        if key in first_const:
            rename[name] = first_const[key]
        else:
            first_const[key] = name
    merged = len(rename)
    seen: dict[tuple, list[str]] = {}
    kept = []
    for layer in net.layers:
        layer.inputs = [rename.get(i, i) for i in layer.inputs]
        if not _mergeable(layer.op) or any(o in outputs for o in layer.outputs):
            kept.append(layer)
            continue
        key = (layer.op, tuple(layer.inputs), tuple(bool(o) for o in layer.outputs), _attr_key(layer.attrs))
        earlier = seen.get(key)
        if earlier is None:
            seen[key] = layer.outputs
            kept.append(layer)
            continue
        for mine, theirs in zip(layer.outputs, earlier):
            if mine:
                rename[mine] = theirs
        merged += 1
    net.layers = kept
    net.prune_tensors()
    return merged
