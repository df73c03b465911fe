"""The source of every generated-kernel layer, from the layer's own data — one function for builder and runtime.

Entry points: `chain_source(layer, tensors) -> text` (the runtime regenerates at load with it; an engine stores the
program, never the text), `generate_kernel_sources(net) -> {hash: text}` (builder: also writes each hash into
`attrs["kernel"]`, so a load can tell that it regenerated the very text the builder timed), `source_hash(text)`.
The generator's inputs are exactly: the chain program (attrs, checked by chain_check.py first), the dtypes of the
layer's inputs and the rank of its output, both from the tensor table (`Network.tensors`, `Engine.tensors`).
Deterministic: the same data gives the same text, byte for byte. Identical chains share one source.
"""

import hashlib

from ..ir import Layer, Network
from ..ir.ops.fused import CHAIN_DTYPES
from ..util.log import get_logger
from .chain_check import MAX_RANK, chain_problem
from .pointwise import generate


class ChainDataError(ValueError):
    """A PointwiseChain layer whose data is not a program the generator accepts (the reason says which field)."""


def source_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _rank(layer: Layer, tensors: dict) -> int:
    out = tensors.get(layer.outputs[0]) if layer.outputs else None
    if out is not None and out.shape is not None:
        return len(out.shape)
    return max((len(tensors[i].shape or ()) for i in layer.inputs if i and i in tensors), default=1)


def chain_source(layer: Layer, tensors: dict) -> str:
    """The Triton module source for PointwiseChain `layer`, whose tensors are described by `tensors`
    (name → TensorInfo). Raises ChainDataError when the layer's data is not a well-formed chain."""
    why = chain_problem(layer.attrs, len(layer.inputs))
    if why is None and len(layer.outputs) != len(layer.attrs["outputs"]):
        why = f"the layer has {len(layer.outputs)} outputs, its program writes {len(layer.attrs['outputs'])}"
    in_dtypes = []
    for name in layer.inputs if why is None else ():
        info = tensors.get(name) if name else None
        if info is None or info.dtype not in CHAIN_DTYPES:
            why = f"input {str(name)[:60]!r} has no dtype a generated kernel reads"
            break
        in_dtypes.append(info.dtype)
    rank = _rank(layer, tensors) if why is None else 0
    if why is None and not 0 <= rank <= MAX_RANK:
        why = f"output rank {rank} is over {MAX_RANK}"
    if why is not None:
        raise ChainDataError(why)
    try:
        return generate(layer, in_dtypes, rank)
    except (KeyError, ValueError, TypeError, IndexError, RuntimeError) as e:
        # the program is well formed but its ops reject these dtypes (the references run on meta tensors)
        raise ChainDataError(f"its program cannot be generated: {type(e).__name__}: {str(e)[:200]}") from e


def generate_kernel_sources(net: Network) -> dict[str, str]:
    """Builder: every PointwiseChain's source by hash, each hash written into its layer's `attrs["kernel"]` ("" for
    a chain the generator cannot take: it runs its reference). Needs final dtypes and ranks in `net.tensors`."""
    sources: dict[str, str] = {}
    for layer in net.layers:
        if layer.op != "PointwiseChain":
            continue
        try:
            text = chain_source(layer, net.tensors)
        except ChainDataError as e:     # e.g. an input whose dtype is known only at run time: no generated kernel
            get_logger().verbose(f"no generated kernel for {layer.name!r}: {e}")
            layer.attrs["kernel"] = ""
            continue
        key = source_hash(text)
        layer.attrs["kernel"] = key
        sources[key] = text
    return sources
