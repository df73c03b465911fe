"""CPU tactics for the small shape ops that run once per layer boundary: Reshape, Unsqueeze, Squeeze, Gather.

Their references are correct everywhere but pay for generality on every call: the shape/axes value input read
back with `.tolist()`, axes normalised and validated, a scalar Gather index wrapped, moved and turned into a
one-element `index_select`. Those costs are most of the op (Gather of one row: 13 µs against 1.6 µs for `select`)
and they repeat per trip inside a Loop body. Here the value input's parsed form is kept per value tensor seen
(constants are one tensor for the engine's lifetime; a computed shape is a new tensor each call and is parsed
again), and a 0-d Gather index takes `select` (+ one clone: the output never aliases the data, as the
reference's copy does not). Everything else — a non-scalar index, an input this fast path does not take — goes
to the op's reference, whose result is the same by definition; the dispatch is per call, no fits() needed, so
Loop bodies (chosen without fits) take these tactics too. Traffic: none (views), a Gather one row.
"""

import torch

from ..ir import get_spec
from ..ir.ops.shape import host_ints, norm_axis
from .registry import tactic


def _cpu_only(layer, device) -> str | None:
    return None if device.type == "cpu" else "a CPU tactic (value inputs are host tensors read per call)"


class _Parsed:
    """parse(value tensor) once per tensor object seen: the last one is kept (holding it keeps its id unique)."""

    def __init__(self, parse):
        self.parse, self.seen, self.value = parse, None, None

    def __call__(self, t):
        if t is not self.seen:
            value = self.parse(t)
            self.seen, self.value = t, value
        return self.value


@tactic("Reshape", name="cpu_cached_shape", priority=5)
class CpuReshape:
    supports = staticmethod(_cpu_only)

    @staticmethod
    def build(layer, cfg, device):
        allowzero = int(layer.attrs.get("allowzero", 0))
        dims = _Parsed(lambda s: host_ints(s, "Reshape shape"))

        def run(inputs):
            data, shape = inputs[0], inputs[1]
            d = dims(shape)
            if not allowzero and 0 in d:
                d = [data.shape[i] if v == 0 else v for i, v in enumerate(d)]
            return [data.reshape(d)]
        return run


def _unsqueeze(data, axis: int):
    return data.unsqueeze(norm_axis(axis, data.dim() + 1))


def _squeeze(data, axis: int):
    axis = norm_axis(axis, data.dim())
    if data.shape[axis] != 1:
        raise ValueError(f"Squeeze axis {axis} has size {data.shape[axis]}, not 1")
    return data.squeeze(axis)


def _single_axis(op: str, apply):
    """A tactic for Unsqueeze/Squeeze with one axis (its axes input parsed once per tensor); other axes lists
    go to the op's reference."""
    class _SingleAxis:
        supports = staticmethod(_cpu_only)

        @staticmethod
        def build(layer, cfg, device):
            ref = get_spec(op).reference
            axes = _Parsed(lambda a: host_ints(a, f"{op} axes"))

            def run(inputs):
                data, a = inputs[0], inputs[1] if len(inputs) > 1 else None
                values = axes(a) if a is not None else None
                if values is None or len(values) != 1:
                    return [ref(data, a)]
                return [apply(data, values[0])]
            return run
    _SingleAxis.__name__ = _SingleAxis.__qualname__ = f"Cpu{op}"
    return tactic(op, name="cpu_cached_shape", priority=5)(_SingleAxis)


CpuUnsqueeze = _single_axis("Unsqueeze", _unsqueeze)
CpuSqueeze = _single_axis("Squeeze", _squeeze)


@tactic("Gather", name="cpu_scalar_index", priority=5)
class CpuGather:
    supports = staticmethod(_cpu_only)

    @staticmethod
    def build(layer, cfg, device):
        ref = get_spec("Gather").reference
        axis_attr = int(layer.attrs.get("axis", 0))

        def run(inputs):
            data, idx = inputs[0], inputs[1]
            if idx.dim() != 0 or idx.device.type != "cpu" or idx.is_floating_point() or data.dim() == 0:
                return [ref(data, idx, axis_attr)]
            axis = norm_axis(axis_attr, data.dim())
            i, n = int(idx), data.shape[axis]
            if not -n <= i < n:
                raise IndexError(f"Gather index {i} is out of range for axis {axis} of size {n}")
            return [data.select(axis, i % n).clone()]
        return run
