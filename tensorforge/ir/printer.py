"""Deterministic text form of a network: one line per layer, with shapes and dtypes.

    input  x: float32[1,3,224,224]
    %conv1:0 = Conv(x, W1, B1) {dilations=[1,1], group=1, pads=[3,3,3,3], strides=[2,2]} -> float32[1,64,112,112]

The same network always prints the same text (attributes sorted, no addresses), so dumps diff cleanly.
With `weights=True`, constants are printed with their values (truncated to `max_values`).
"""

import torch

from .dtypes import dtype_name
from .network import Network


def _fmt_attr(v) -> str:
    if isinstance(v, torch.Tensor):
        return f"tensor<{dtype_name(v.dtype)}[{','.join(map(str, v.shape))}]>"
    if isinstance(v, float):
        return repr(round(v, 9))
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_fmt_attr(x) for x in v) + "]"
    if isinstance(v, Network):
        return f"<subgraph {v.name}: {len(v.layers)} layers>"
    return repr(v) if isinstance(v, str) else str(v)


def _fmt_values(t: torch.Tensor, max_values: int) -> str:
    flat = t.reshape(-1)
    vals = flat[:max_values].tolist()
    more = f", … ({flat.numel()} values)" if flat.numel() > max_values else ""
    return "[" + ", ".join(repr(round(v, 6)) if isinstance(v, float) else str(v) for v in vals) + more + "]"


def format_network(net: Network, weights: bool = False, max_values: int = 8) -> str:
    lines = [f"network {net.name}"]
    for name in net.inputs:
        lines.append(f"input  {name}: {net.tensors[name].describe()}")
    for name in sorted(net.constants):
        t = net.constants[name]
        desc = f"const  {name}: {dtype_name(t.dtype)}[{','.join(map(str, t.shape))}]"
        if weights:
            desc += " = " + _fmt_values(t, max_values)
        lines.append(desc)
    for layer in net.layers:
        attrs = ", ".join(f"{k}={_fmt_attr(v)}" for k, v in sorted(layer.attrs.items()))
        outs = ", ".join(f"%{o}" for o in layer.outputs)
        types = ", ".join(net.tensors[o].describe() if o in net.tensors else "?" for o in layer.outputs)
        extra = f" [{layer.tactic}]" if layer.tactic else ""
        lines.append(f"{outs} = {layer.op}({', '.join(layer.inputs)})" + (f" {{{attrs}}}" if attrs else "")
                     + f" -> {types}{extra}")
    for name in net.outputs:
        lines.append(f"output {name}: {net.tensors[name].describe()}")
    return "\n".join(lines) + "\n"
