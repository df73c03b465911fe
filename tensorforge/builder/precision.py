"""Reduced precision (--fp16 / --bf16): float32 weights and activations become half precision.

Network inputs and outputs keep their declared dtype (a Cast is inserted at each boundary), so callers
feed and receive float32 as with TensorRT. Cast(to=float32) inside the graph becomes a cast to the
half type; numerically sensitive ops (softmax, normalisation) accumulate in float32 inside their kernels.
Memory traffic: halves every activation and weight read.
"""

import torch

from ..ir import Layer, Network, TensorInfo, dtype_name


def convert_precision(net: Network, half: torch.dtype, output_dtypes: dict[str, torch.dtype]) -> int:
    """Rewrite `net` in place to compute in `half`; returns the number of constants converted."""
    hname = dtype_name(half)
    converted = 0
    for name, value in list(net.constants.items()):
        if value.dtype == torch.float32:
            net.add_constant(name, value.to(half))
            converted += 1
    for layer in net.layers:
        if layer.op == "Cast" and layer.attrs.get("to") == "float32":
            layer.attrs["to"] = hname
    # inputs: cast on entry
    renames: dict[str, str] = {}
    entry: list[Layer] = []
    for name in net.inputs:
        if net.tensors[name].dtype == torch.float32:
            inner = net.unique_name(f"{name}/{hname}")
            entry.append(Layer(f"{name}/to_{hname}", "Cast", [name], [inner], {"to": hname}, [name], precision=hname))
            renames[name] = inner
    for layer in net.layers:
        layer.inputs = [renames.get(i, i) for i in layer.inputs]
    net.layers = entry + net.layers
    for layer in entry:
        net.tensors.setdefault(layer.outputs[0], TensorInfo(layer.outputs[0], half))
    # outputs: cast back on exit, keeping the output's name
    for i, name in enumerate(net.outputs):
        want = output_dtypes.get(name)
        if want != torch.float32:
            continue
        if name in renames:        # an input passed straight through
            continue
        producer = next(layer for layer in net.layers if name in layer.outputs)
        inner = net.unique_name(f"{name}/{hname}")
        producer.outputs = [inner if o == name else o for o in producer.outputs]
        for layer in net.layers:
            layer.inputs = [inner if x == name else x for x in layer.inputs]
        net.tensors[inner] = TensorInfo(inner, half)
        net.layers.append(Layer(f"{name}/to_float32", "Cast", [inner], [name], {"to": "float32"}, [name],
                                precision="float32"))
    for layer in net.layers:
        layer.precision = layer.precision or hname
    return converted
