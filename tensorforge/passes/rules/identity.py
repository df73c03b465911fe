"""No-op removal: Identity, and Cast to the type the tensor already has, are dropped; readers use the input.

Exporters emit both: torch.onnx.export writes `.type(value.dtype)` / `.to(x.dtype)` as a Cast even when the
type does not change (GPT-2's attention casts its softmax to v's type), TF converters emit Identity chains.
A no-op between two fusable layers hides the pattern (Softmax → Cast → MatMul is not attention until the Cast
goes) and costs a kernel launch. A layer whose output is a network output is kept (the name must survive).
"""

from ...ir import Network, dtype_name
from ...util.log import get_logger
from ..pattern import Graph


def remove_noops(net: Network, shape_points: list[dict] | None = None, max_fold_elements: int = 1 << 24, **_) -> int:
    g = Graph(net, shape_points or [], max_fold_elements)
    rename: dict[str, str] = {}
    kept, removed = [], 0
    outputs = set(net.outputs)
    for layer in net.layers:
        layer.inputs = [rename.get(i, i) for i in layer.inputs]
        src = layer.inputs[0] if layer.inputs else ""
        noop = layer.op == "Identity" or (layer.op == "Cast" and src and g.dtype(src) is not None
                                          and dtype_name(g.dtype(src)) == layer.attrs.get("to"))
        if noop and len(layer.outputs) == 1 and src and layer.outputs[0] not in outputs:
            rename[layer.outputs[0]] = src
            removed += 1
            get_logger().verbose(f"removed no-op {layer.op} {layer.name!r}")
            continue
        kept.append(layer)
    net.layers = kept
    net.prune_tensors()
    return removed
