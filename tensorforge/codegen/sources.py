"""Generate the kernel source of every generated-kernel layer of a network (builder entry point).

`generate_kernel_sources(net)` writes each source's SHA-256 into the layer (`attrs["kernel"]`) and returns
{hash: text} for Engine.kernel_sources. Needs final dtypes and ranks in `net.tensors` (run after shape
inference). Identical chains share one source (and one compiled kernel).
"""

import hashlib

from ..ir import Network
from .pointwise import generate


def generate_kernel_sources(net: Network) -> dict[str, str]:
    sources: dict[str, str] = {}
    for layer in net.layers:
        if layer.op != "PointwiseChain":
            continue
        out = net.tensors[layer.outputs[0]]
        rank = len(out.shape) if out.shape is not None else max(
            (len(net.tensors[i].shape or ()) for i in layer.inputs if i), default=1)
        text = generate(layer, [net.tensors[i].dtype for i in layer.inputs], rank)
        key = hashlib.sha256(text.encode()).hexdigest()
        layer.attrs["kernel"] = key
        sources[key] = text
    return sources
