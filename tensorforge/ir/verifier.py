"""Structural checks of a Network: every name defined once, before use; every op registered.

Returns a list of problems (empty when the network is well formed); `check()` raises on the first.
"""

from .network import Network
from .opspec import has_spec


def problems(net: Network) -> list[str]:
    out: list[str] = []
    defined = set(net.inputs) | set(net.constants)
    for name in net.inputs:
        if name in net.constants:
            out.append(f"{name!r} is both an input and a constant")
    for layer in net.layers:
        if not has_spec(layer.op):
            out.append(f"layer {layer.name!r}: op {layer.op!r} is not registered")
        for i in layer.inputs:
            if i and i not in defined:
                out.append(f"layer {layer.name!r} reads {i!r} before it is defined")
        for o in layer.outputs:
            if o and o in defined:
                out.append(f"layer {layer.name!r} redefines {o!r}")
            defined.add(o)
    for name in net.outputs:
        if name not in defined:
            out.append(f"output {name!r} is never defined")
    return out


def check(net: Network) -> None:
    found = problems(net)
    if found:
        raise ValueError(f"malformed network {net.name!r}: {found[0]}" + (f" (+{len(found) - 1} more)" if len(found) > 1 else ""))
