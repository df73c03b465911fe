"""Constant folding: a layer whose outputs have the same known value at every profile shape point
becomes a constant.

Values come from `ir.interpret.propagate`, which evaluates layers whose inputs are all known (constants,
and Shape of inputs whose shape is fixed at that point). A value is folded only if it is known and
identical at every shape point (min/opt/max of each profile), so shape arithmetic that depends on a
dynamic dimension stays in the engine and runs on the host. Outputs above `max_fold_elements` are not
folded (they would bloat the engine; such layers run at inference time instead).
"""

import torch

from ..ir import Layer, Network
from ..ir.interpret import propagate


def fold_constants(net: Network, shape_points: list[dict], max_fold_elements: int = 1 << 24, **_) -> int:
    known: dict[str, torch.Tensor] | None = None
    for point in shape_points:
        env = propagate(net, point, max_fold_elements)
        real = {k: v for k, v in env.items() if v.device.type != "meta" and k not in net.constants}
        if known is None:
            known = real
        else:
            known = {k: v for k, v in known.items() if k in real and real[k].shape == v.shape
                     and real[k].dtype == v.dtype and torch.equal(real[k], v)}
    known = known or {}
    folded = 0
    kept = []
    for layer in net.layers:
        if layer.outputs and all(o in known or not o for o in layer.outputs):
            for o in layer.outputs:
                if o:
                    net.add_constant(o, known[o])
            folded += 1
        else:
            kept.append(layer)
    net.layers = kept
    # a network output that became a constant still needs a producer: re-emit it as Identity of a copy
    for name in net.outputs:
        if name in net.constants:
            src = net.add_constant(net.unique_name(f"{name}/value"), net.constants.pop(name))
            net.layers.append(Layer(f"{name}/identity", "Identity", [src], [name], origin=[name]))
    net.prune_tensors()
    return folded

