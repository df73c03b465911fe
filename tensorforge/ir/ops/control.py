"""Control flow: If, Loop, Scan, SequenceMap — ops whose attributes are sub-networks (bodies).

A body is an ir.Network stored in the layer's attributes (and in the engine file as data, see
engine/serialize.py). Tensors a body reads from the enclosing network are passed explicitly: they are
the layer's trailing inputs and the body's trailing inputs, in the same order (`num_captured` of them;
for If, both branches take the whole captured list). The references run a body with `run_network`, on
the device of the values it is given: layer by layer with kernels when the `subnetwork` tactic
(kernels/subnetwork.py) has built them, with the layers' references otherwise.

    If(cond, *captured)                      → outputs of then_branch or else_branch
    Loop(M, cond, *v0, *captured)            → final v, then every scan output stacked on a new axis 0
         body(i, cond, *v, *captured)        → (cond', *v', *scan_elements)
    Scan(*s0, *xs, *captured)                → final s, then scan outputs stacked on scan_output_axes
         body(*s, *x_slices, *captured)      → (*s', *y_slices)
    SequenceMap(seq, *extra, *captured)      → one sequence per body output, element i from sample i

Shape inference cannot run data-dependent trip counts, so outputs are placeholders carrying the dtype
the body declares (ir/dynamic.py). Traffic: whatever the body moves, times the trip count.
"""

from contextlib import contextmanager
from contextvars import ContextVar

import torch

from ...util.values import TensorSequence
from .. import dynamic
from ..interpret import run_reference
from ..network import Network
from ..opspec import REQUIRED, op


def _device_of(values) -> torch.device:
    for v in values:
        if v is not None and hasattr(v, "device"):
            return v.device
    return torch.device("cpu")


_KERNELS: ContextVar[dict | None] = ContextVar("tensorforge_body_kernels", default=None)


@contextmanager
def body_kernels(table: dict):
    """While active, `run_network` runs a body's layers with the kernels in `table` (id(body) → one kernel
    per layer, built by kernels/subnetwork.py) instead of their references."""
    token = _KERNELS.set(table)
    try:
        yield
    finally:
        _KERNELS.reset(token)


def run_network(net: Network, inputs: list, device: torch.device | None = None) -> list:
    """Run `net` on `inputs` (one per net.inputs): each layer by its kernel when a `body_kernels` table
    covers this body, else by its reference. Returns the body's outputs."""
    device = device or _device_of(inputs)
    kernels = (_KERNELS.get() or {}).get(id(net))
    env = {name: t.to(device) for name, t in net.constants.items()}
    env.update(zip(net.inputs, inputs))
    for index, layer in enumerate(net.layers):
        ins = [env[i] if i else None for i in layer.inputs]
        outs = kernels[index](ins) if kernels is not None else run_reference(layer, ins)
        env.update((name, t) for name, t in zip(layer.outputs, outs) if name)
    return [env[name] for name in net.outputs]


def _declared(net: Network, names: list[str]) -> list:
    """Placeholders for values a body produces: the dtype its network declares, nothing else."""
    return [dynamic.unknown(net.tensors[n].dtype if n in net.tensors else None) for n in names]


def _truth(t) -> bool:
    return bool(t.item() if t.numel() == 1 else t.reshape(-1)[0].item())   # item() alone: 0.3 µs, not 3.8


# ---- If ----------------------------------------------------------------------------------------
def _if_infer(cond, *captured, then_branch, else_branch):
    return _declared(then_branch, then_branch.outputs)


@op("If", attrs={"then_branch": REQUIRED, "else_branch": REQUIRED}, infer=_if_infer)
def if_(cond, *captured, then_branch, else_branch):
    branch = then_branch if _truth(cond) else else_branch
    return tuple(run_network(branch, list(captured), _device_of([cond, *captured])))


# ---- Loop --------------------------------------------------------------------------------------
def _loop_infer(m, cond, *rest, body, num_captured):
    return _declared(body, body.outputs[1:])


def loop_trips(max_trips, cond, rest, body, num_captured, step, device) -> tuple:
    """Loop's semantics, shared by the reference below and the body-program tactic (kernels/subnetwork.py):
    for i in range(M) while cond: (cond, *v, *scan) = step(i, going, v, captured); returns (*v, *stacked scans).
    `step` runs the body once (the reference builds fresh i/cond tensors, the tactic reuses its own)."""
    n_state = len(rest) - num_captured
    state, captured = list(rest[:n_state]), list(rest[n_state:])
    limit = None if max_trips is None else int(max_trips.reshape(-1)[0].item())
    going = True if cond is None else _truth(cond)
    n_scan = len(body.outputs) - 1 - n_state
    scans: list[list] = [[] for _ in range(n_scan)]
    i = 0
    while going and (limit is None or i < limit):
        outs = step(i, going, state, captured)
        going, state = _truth(outs[0]), outs[1:1 + n_state]
        for k in range(n_scan):
            scans[k].append(outs[1 + n_state + k])
        i += 1
    stacked = []
    for k, items in enumerate(scans):
        if items:
            stacked.append(torch.stack([t.to(device) for t in items]))
        else:
            dtype = body.tensors[body.outputs[1 + n_state + k]].dtype or torch.float32
            stacked.append(torch.empty((0,), dtype=dtype, device=device))
    return (*state, *stacked)


@op("Loop", attrs={"body": REQUIRED, "num_captured": 0}, infer=_loop_infer)
def loop(max_trips, cond, *rest, body, num_captured):
    """for i in range(M) while cond: (cond, *v, *scan) = body(i, cond, *v, *captured)."""
    device = _device_of([max_trips, cond, *rest])

    def step(i, going, state, captured):
        return run_network(body, [torch.tensor(i, dtype=torch.int64, device=device),
                                  torch.tensor(going, device=device), *state, *captured], device)
    return loop_trips(max_trips, cond, rest, body, num_captured, step, device)


# ---- Scan --------------------------------------------------------------------------------------
def _scan_infer(*ins, body, num_scan_inputs, num_captured, **_):
    return _declared(body, body.outputs)


@op("Scan", attrs={"body": REQUIRED, "num_scan_inputs": REQUIRED, "num_captured": 0, "scan_input_axes": None,
                   "scan_input_directions": None, "scan_output_axes": None, "scan_output_directions": None,
                   "batch_axis": 0},
    infer=_scan_infer)
def scan(*ins, body, num_scan_inputs, num_captured, scan_input_axes=None, scan_input_directions=None,
         scan_output_axes=None, scan_output_directions=None, batch_axis=0):
    """Scan-9+ semantics; batch_axis=1 is Scan-8 (inputs carry a leading batch axis, scanned over axis 1)."""
    n_state = len(ins) - num_scan_inputs - num_captured
    if batch_axis:
        batch = ins[0].shape[0] if ins else 0
        per = [scan(*[t[b] for t in ins[:n_state + num_scan_inputs]], *ins[n_state + num_scan_inputs:], body=body,
                    num_scan_inputs=num_scan_inputs, num_captured=num_captured,
                    scan_input_directions=scan_input_directions) for b in range(batch)]
        return tuple(torch.stack([p[k] for p in per]) for k in range(len(body.outputs)))
    state = list(ins[:n_state])
    xs = list(ins[n_state:n_state + num_scan_inputs])
    captured = list(ins[n_state + num_scan_inputs:])
    in_axes = [a % x.dim() for a, x in zip(scan_input_axes or [0] * len(xs), xs)]
    in_dirs = scan_input_directions or [0] * len(xs)
    steps = xs[0].shape[in_axes[0]] if xs else 0
    device = _device_of(ins)
    n_out = len(body.outputs) - n_state
    ys: list[list] = [[] for _ in range(n_out)]
    for t in range(steps):
        slices = [x.select(ax, steps - 1 - t if d else t) for x, ax, d in zip(xs, in_axes, in_dirs)]
        outs = run_network(body, [*state, *slices, *captured], device)
        state = outs[:n_state]
        for k in range(n_out):
            ys[k].append(outs[n_state + k])
    out_axes = scan_output_axes or [0] * n_out
    out_dirs = scan_output_directions or [0] * n_out
    stacked = []
    for k in range(n_out):
        items = ys[k][::-1] if out_dirs[k] else ys[k]
        if not items:
            raise ValueError("Scan over zero steps has no shape for its scan outputs")
        stacked.append(torch.stack(items, dim=out_axes[k] % (items[0].dim() + 1)))
    return (*state, *stacked)


# ---- SequenceMap ------------------------------------------------------------------------------
def _sequence_map_infer(seq, *rest, body, num_captured):
    return [dynamic.sequence_of(p.dtype if dynamic.placeholder_info(p) is None or dynamic.placeholder_info(p).dtype_known
                                else None) for p in _declared(body, body.outputs)]


@op("SequenceMap", attrs={"body": REQUIRED, "num_captured": 0}, infer=_sequence_map_infer)
def sequence_map(seq, *rest, body, num_captured):
    n_extra = len(rest) - num_captured
    extra, captured = list(rest[:n_extra]), list(rest[n_extra:])
    device = _device_of([seq, *rest])
    outs: list[list] = [[] for _ in body.outputs]
    for i in range(len(seq)):
        sample = [a[i] if isinstance(a, TensorSequence) else a for a in extra]
        for k, t in enumerate(run_network(body, [seq[i], *sample, *captured], device)):
            outs[k].append(t)
    return tuple(TensorSequence(items, body.tensors[name].dtype if name in body.tensors else None)
                 for items, name in zip(outs, body.outputs))
