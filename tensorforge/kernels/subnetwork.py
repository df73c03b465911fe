"""The `subnetwork` tactic: control-flow layers whose bodies run as pre-planned programs of kernels.

For If, Loop, Scan, SequenceMap and FlexAttention, `build` instantiates one kernel per layer of every body
(nested bodies get their own tactic the same way), choosing each layer's highest-priority applicable tactic —
bodies are not timed. If, Loop and Scan (Scan-9+ form) compile each body once into a `BodyProgram`: numbered
slots, the body's constants on the device once, each layer's kernel with its input and output slot numbers, and
every slot cleared after its last reader — so a trip is one list copy and the kernel calls, with no name lookups,
no dict built, no constant moved and no trip-counter tensor made again (counters are made once per index and kept).
Layers that read only captured tensors and constants, and a Loop's row-lifted layers (X[i]·W computed as (X·W)[i]
for all trips at once), run once per call in the program's prelude (kernels/body_program.py).
Their control logic (which branch; trip count and condition; slicing and stacking) follows the op references of
ir/ops/control.py exactly. On the CPU a Loop or Scan whose tensors are all small runs its trips on one intra-op
thread (`_one_thread_if_small`). SequenceMap, FlexAttention and Scan-8 (batch_axis) run the reference's control logic
inside `ir.ops.control.body_kernels(table)`, so `run_network` dispatches every body layer to its kernel.
Memory traffic is the bodies' own, times the trip count.
"""

from contextlib import nullcontext

import torch

from ..ir import Network, get_spec
from ..ir.interpret import as_outputs
from ..ir.ops.control import body_kernels, loop_trips
from ..util.cpu_threads import cpu_threads
from .body_program import BodyProgram
from .registry import candidates, tactic

_OPS = ("If", "Loop", "Scan", "SequenceMap", "FlexAttention")
SMALL_BODY = 1 << 16      # elements: a CPU body whose every tensor is at most this runs on one intra-op thread


def _one_thread_if_small(device, body_max: int, values) -> object:
    """On the CPU, a body whose tensors are all small runs on one intra-op thread: each of its ops is a few µs,
    and waking the other threads for each op costs more than it saves (loop_if_32, 2 cores, loaded machine: a trip
    at 2 threads 3.8 ms a call, at 1 thread 2.4 ms). Returns the scope to run the trips in."""
    if device.type != "cpu" or body_max > SMALL_BODY:
        return nullcontext()
    for v in values:
        if isinstance(v, torch.Tensor) and v.numel() > SMALL_BODY:
            return nullcontext()
    return cpu_threads(1)


def _largest_constant(net: Network) -> int:
    sizes = [t.numel() for t in net.constants.values() if isinstance(t, torch.Tensor)]
    return max(sizes, default=0)


def _kernels(net: Network, device) -> list:
    kernels = []
    for layer in net.layers:
        found, reasons = candidates(layer, device)
        if not found:
            raise ValueError(f"body layer {layer.name!r} ({layer.op}) has no tactic on {device}: {reasons}")
        # bodies are not shape-checked at build: take the best tactic that runs any inputs (no fits() test)
        tac, cfg = next(((t, c) for t, c in found if t.fits is None), found[0])
        layer.tactic = tac.id(cfg)
        kernels.append(tac.build(layer, cfg, device))
    return kernels


def _truth(t) -> bool:
    return bool(t.item() if t.numel() == 1 else t.reshape(-1)[0].item())


def _device_of(values, default):
    for v in values:
        if v is not None and hasattr(v, "device"):
            return v.device
    return default


class _Counters:
    """The trip counters i = 0, 1, … as int64 scalars on one device, each made once and kept (bodies read them,
    never write them: kernels write only their own fresh outputs)."""

    def __init__(self):
        self.device, self.items = None, []

    def get(self, i: int, device) -> torch.Tensor:
        if device != self.device:
            self.device, self.items = device, []
        while len(self.items) <= i:
            self.items.append(torch.tensor(len(self.items), dtype=torch.int64, device=device))
        return self.items[i]


def _loop(layer, device):
    body: Network = layer.attrs["body"]
    kernels = _kernels(body, device)
    num_captured = int(layer.attrs.get("num_captured", 0))
    captured = body.inputs[len(body.inputs) - num_captured:] if num_captured else []
    # trip-invariant layers and row-lifted ones (X[i]·W → (X·W)[i]) run once per call (kernels/body_program.py)
    hoisted = BodyProgram(body, device, kernels, invariant=captured, counter=body.inputs[0])
    plain = hoisted if not hoisted.lifted and not any(len(s) == 4 for s in hoisted.prelude_steps) else \
        BodyProgram(body, device, kernels, invariant=captured, hoist=False)
    counters, flags = _Counters(), {}
    body_max = _largest_constant(body)

    def flag(value: bool, dev) -> torch.Tensor:
        key = (value, dev)
        if key not in flags:
            flags[key] = torch.tensor(value, device=dev)
        return flags[key]

    def run(inputs):
        """Loop(M, cond, *v0, *captured) with ir/ops/control.loop's semantics (loop_trips): trips while i < M
        and cond, each through the pre-planned body program; its prelude once per call."""
        dev = _device_of(inputs, device)
        limit = None if inputs[0] is None else int(inputs[0].reshape(-1)[0].item())
        cap = inputs[len(inputs) - num_captured:] if num_captured else []
        with _one_thread_if_small(dev, body_max, inputs[2:]):
            program, base = hoisted, hoisted.prelude(cap, limit)
            if base is None:                      # a lift's run-time shapes did not hold: the plain program
                program, base = plain, plain.prelude(cap, limit)

            def step(i, going, state, captured):
                return program.trip(base, i, [counters.get(i, dev), flag(going, dev), *state])
            return list(loop_trips(inputs[0], inputs[1], inputs[2:], body, num_captured, step, dev))
    return run


def _if(layer, device):
    then_b, else_b = layer.attrs["then_branch"], layer.attrs["else_branch"]
    then_p = BodyProgram(then_b, device, _kernels(then_b, device))
    else_p = BodyProgram(else_b, device, _kernels(else_b, device))
    n = len(layer.outputs)

    def run(inputs):
        return (then_p if _truth(inputs[0]) else else_p)(list(inputs[1:]))[:n]
    return run


def _scan(layer, device):
    a = layer.attrs
    body: Network = a["body"]
    num_scan, num_captured = int(a["num_scan_inputs"]), int(a.get("num_captured", 0))
    captured_names = body.inputs[len(body.inputs) - num_captured:] if num_captured else []
    program = BodyProgram(body, device, _kernels(body, device), invariant=captured_names)
    body_max = _largest_constant(body)

    def run(ins):
        """Scan-9+ as ir/ops/control.scan: slices along the input axes (reversed where asked), outputs stacked."""
        n_state = len(ins) - num_scan - num_captured
        state = list(ins[:n_state])
        xs = list(ins[n_state:n_state + num_scan])
        captured = list(ins[n_state + num_scan:])
        in_axes = [ax % x.dim() for ax, x in zip(a.get("scan_input_axes") or [0] * len(xs), xs)]
        in_dirs = a.get("scan_input_directions") or [0] * len(xs)
        steps = xs[0].shape[in_axes[0]] if xs else 0
        n_out = len(body.outputs) - n_state
        ys: list[list] = [[] for _ in range(n_out)]
        per_step = [x.select(ax, 0) for x, ax in zip(xs, in_axes)] if steps else []
        with _one_thread_if_small(xs[0].device if xs else device, body_max, [*state, *per_step, *captured]):
            base = program.prelude(captured)      # captured-only layers once per call
            for t in range(steps):
                slices = [x.select(ax, steps - 1 - t if d else t) for x, ax, d in zip(xs, in_axes, in_dirs)]
                outs = program.trip(base, t, [*state, *slices])
                state = outs[:n_state]
                for k in range(n_out):
                    ys[k].append(outs[n_state + k])
        out_axes = a.get("scan_output_axes") or [0] * n_out
        out_dirs = a.get("scan_output_directions") or [0] * n_out
        stacked = []
        for k in range(n_out):
            items = ys[k][::-1] if out_dirs[k] else ys[k]
            if not items:
                raise ValueError("Scan over zero steps has no shape for its scan outputs")
            stacked.append(torch.stack(items, dim=out_axes[k] % (items[0].dim() + 1)))
        return [*state, *stacked]
    return run


def _by_reference(layer, device):
    """The op reference's control logic, its bodies' layers dispatched to their kernels (body_kernels)."""
    table: dict = {}
    for value in layer.attrs.values():
        if isinstance(value, Network):
            table[id(value)] = _kernels(value, device)
    fn, attrs, n = get_spec(layer.op).reference, layer.attrs, len(layer.outputs)

    def run(inputs):
        with body_kernels(table):
            return as_outputs(fn(*inputs, **attrs), n)
    return run


def _build(layer, cfg, device):
    if layer.op == "Loop":
        return _loop(layer, device)
    if layer.op == "If":
        return _if(layer, device)
    if layer.op == "Scan" and not layer.attrs.get("batch_axis", 0):
        return _scan(layer, device)
    return _by_reference(layer, device)


for _op in _OPS:
    tactic(_op, name="subnetwork", priority=0)(type(f"Subnetwork{_op}", (), {
        "supports": staticmethod(lambda layer, device: None), "build": staticmethod(_build)}))
