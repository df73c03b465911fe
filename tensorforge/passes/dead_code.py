"""Dead-code removal: drop layers none of whose outputs reach a network output.

One backward sweep over the topologically ordered layers: O(layers + edges).
"""

from ..ir import Network


def remove_dead_layers(net: Network, **_) -> int:
    live = set(net.outputs)
    kept = []
    for layer in reversed(net.layers):
        if any(o in live for o in layer.outputs):
            kept.append(layer)
            live.update(i for i in layer.inputs if i)
    removed = len(net.layers) - len(kept)
    net.layers = kept[::-1]
    net.prune_tensors()
    return removed
