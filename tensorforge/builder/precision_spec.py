"""trtexec's per-layer precision grammar, and which layers a spec's names select.

    --layerPrecisions=*:fp16,layer_1:fp32            → [("*", "fp16"), ("layer_1", "fp32")]
    --layerOutputTypes=*:fp16,layer_1:fp32+fp16      → [("*", ["fp16"]), ("layer_1", ["fp32", "fp16"])]

Entries apply in order, later ones win; `*` stands for every layer no entry names. A name selects the layers
whose own name it is, or whose ONNX origin contains it (a fused layer matches if any of its nodes is named), or,
for an engine layer name such as `Relu_3/chain` (made by a fusion after this point of the build), the layer its
prefix before the last `/…` names. Entry points: `parse_precisions`, `parse_output_types`, `select`.
"""

import torch

from ..ir import Network
from ..util.errors import UsageError

TYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "int8": torch.int8,
         "fp8": torch.float8_e4m3fn}
_NOT_COMPUTE = {"int32", "int64", "bool", "uint8", "int4"}


def _type(text: str, flag: str) -> str:
    t = text.strip().lower()
    if t in TYPES:
        return t
    if t in _NOT_COMPUTE:
        raise UsageError(f"{flag}: {text!r} is not a compute precision tensorforge chooses between",
                         f"use one of {', '.join(TYPES)}")
    raise UsageError(f"{flag}: unknown type {text!r}", f"use one of {', '.join(TYPES)} (e.g. {flag}=*:fp16,name:fp32)")


def _entries(text: str, flag: str) -> list[tuple[str, str]]:
    out = []
    for part in text.split(","):
        name, sep, value = part.rpartition(":")
        if not sep or not name or not value:
            raise UsageError(f"{flag} takes name:type entries, got {part!r}", f"write {flag}=*:fp16,layer_name:fp32")
        out.append((name.strip(), value))
    return out


def parse_precisions(text: str, flag: str = "--layerPrecisions") -> list[tuple[str, str]]:
    return [(n, _type(v, flag)) for n, v in _entries(text, flag)]


def parse_output_types(text: str, flag: str = "--layerOutputTypes") -> list[tuple[str, list[str]]]:
    return [(n, [_type(v, flag) for v in value.split("+")]) for n, value in _entries(text, flag)]


def _matches(net: Network, name: str) -> list[str]:
    hit = [la.name for la in net.layers if la.name == name or name in la.origin]
    probe = name
    while not hit and "/" in probe.strip("/"):
        probe = probe.rsplit("/", 1)[0]
        hit = [la.name for la in net.layers if la.name == probe]
    return hit


def select(net: Network, entries: list, flag: str, known: set[str] = frozenset(), log=None) -> dict[str, object]:
    """{layer name: value} for the spec `entries`; `known` holds names the original model had (a name that an
    optimisation removed is logged, not an error)."""
    named: dict[str, object] = {}
    star = None
    for name, value in entries:
        if name == "*":
            star = value
            continue
        layers = _matches(net, name)
        if not layers:
            if name in known:
                if log is not None:
                    log.info(f"{flag}: {name!r} is no longer a layer (folded or removed by optimisation); skipped")
                continue
            raise UsageError(f"{flag} names {name!r}, which is neither a layer nor an ONNX node of the network",
                             "use ONNX node names or the layer names --dumpLayerInfo prints")
        for layer in layers:
            named[layer] = value
    if star is not None:
        for layer in net.layers:
            named.setdefault(layer.name, star)
    return named
