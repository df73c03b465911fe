"""Activation memory plan: one arena, tensors placed at offsets so that tensors alive at the same time never overlap.

Entry point: `plan_memory(layers, sizes, keep)` → MemoryPlan, and `plan_network(net, max_points)` which sizes every
device activation at the largest shape of every profile. The plan is recorded in the engine's build info
(`memory`: planned peak, the naive sum, tensor count, and which inputs of device layers are host values) and
logged; the runtime realises the same liveness by releasing each activation after its last reader, so the
allocator (or a CUDA graph's private pool) reuses it.

    lifetime(t) = [index of the producing layer, index of the last reading layer]   (network outputs: to the end)
    peak = max over placed t of offset(t) + size(t)      ≤      naive = Σ size(t)
"""

from dataclasses import dataclass, field

import torch

from ..ir import Layer, Network, get_spec
from ..ir.interpret import propagate

ALIGN = 256        # bytes; the CUDA caching allocator rounds blocks to 512, cuBLAS wants 256-aligned operands


@dataclass
class MemoryPlan:
    offsets: dict[str, int] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)          # aligned bytes
    lifetimes: dict[str, tuple[int, int]] = field(default_factory=dict)
    peak_bytes: int = 0
    naive_bytes: int = 0
    host_value_inputs: dict[str, list[int]] = field(default_factory=dict)   # layer → input positions kept on host

    def as_dict(self) -> dict:
        return {"activation_peak_bytes": self.peak_bytes, "activation_naive_bytes": self.naive_bytes,
                "tensors": len(self.sizes), "host_value_inputs": self.host_value_inputs}


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def lifetimes(layers: list[Layer], planned: set[str], keep: set[str]) -> dict[str, tuple[int, int]]:
    """[first, last] layer index of every planned tensor: from its producer to its last reader."""
    out: dict[str, list[int]] = {}
    for index, layer in enumerate(layers):
        for name in layer.outputs:
            if name in planned and name not in out:
                out[name] = [index, index]
        for name in layer.inputs:
            if name in out:
                out[name][1] = index
    end = len(layers)
    return {n: (a, end if n in keep else b) for n, (a, b) in out.items()}


def plan_memory(layers: list[Layer], sizes: dict[str, int], keep: set[str] = frozenset()) -> MemoryPlan:
    """Greedy by size: largest tensor first, each at the lowest offset free for its whole lifetime.

    `sizes`: bytes of every tensor to plan (outputs of device layers); `keep`: tensors alive to the end (outputs).
    O(n²) in the number of tensors with overlapping lifetimes, a few ms for a 500-layer network.
    """
    live = lifetimes(layers, set(sizes), set(keep))
    plan = MemoryPlan(lifetimes=live)
    order = sorted(live, key=lambda n: (-sizes[n], live[n][0], n))
    placed: list[tuple[int, int, int, int]] = []          # (offset, end, first, last)
    for name in order:
        size = _align(max(1, sizes[name]))
        first, last = live[name]
        clashes = sorted((o, e) for o, e, a, b in placed if a <= last and first <= b)
        offset = 0
        for o, e in clashes:
            if offset + size <= o:
                break
            offset = max(offset, e)
        placed.append((offset, offset + size, first, last))
        plan.offsets[name], plan.sizes[name] = offset, size
        plan.peak_bytes = max(plan.peak_bytes, offset + size)
        plan.naive_bytes += size
    return plan


def host_value_inputs(net: Network) -> dict[str, list[int]]:
    """Device layers' inputs whose values the op reads on the host (OpSpec.value_inputs: shapes, axes, pads …).

    The runtime hands these over as the CPU tensors that shape arithmetic and constants already are, so reading
    them costs no device→host copy (no sync, and the engine stays capturable in a CUDA graph)."""
    out = {}
    for layer in net.layers:
        if layer.placement == "host":
            continue
        pos = [i for i in get_spec(layer.op).value_inputs if i < len(layer.inputs) and layer.inputs[i]]
        if pos:
            out[layer.name] = pos
    return out


def plan_network(net: Network, max_points: list[dict], max_fold_elements: int = 1 << 24,
                 envs: list[dict] | None = None) -> MemoryPlan:
    """Plan the device activations of `net` (layers with placement set), each sized at its largest shape over
    `max_points` (the max shapes of every profile; `envs`: their propagated tensors if the caller has them).
    Network inputs belong to the caller and are not planned."""
    device_outputs = {o for layer in net.layers if layer.placement != "host" for o in layer.outputs if o}
    sizes: dict[str, int] = {}
    for env in envs if envs is not None else (propagate(net, p, max_fold_elements) for p in max_points):
        for name in device_outputs:
            t = env.get(name)
            if isinstance(t, torch.Tensor):
                sizes[name] = max(sizes.get(name, 0), t.numel() * t.element_size())
    plan = plan_memory(net.layers, sizes, set(net.outputs))
    plan.host_value_inputs = host_value_inputs(net)
    return plan
