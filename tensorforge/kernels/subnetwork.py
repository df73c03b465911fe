"""The `subnetwork` tactic: control-flow layers whose bodies run through kernels, not references.

For If, Loop, Scan, SequenceMap and FlexAttention, `build` instantiates one kernel per layer of every body
(nested bodies get their own tactic the same way), choosing each layer's highest-priority applicable
tactic — bodies are not timed. Running the layer calls the op's reference (the control logic: which
branch, how many trips) inside `ir.ops.control.body_kernels(table)`, so `run_network` dispatches every
body layer to its kernel. Memory traffic is the bodies' own, times the trip count.
"""

from ..ir import Network, get_spec
from ..ir.interpret import as_outputs
from ..ir.ops.control import body_kernels
from .registry import candidates, tactic

_OPS = ("If", "Loop", "Scan", "SequenceMap", "FlexAttention")


def _prepare(net: Network, device, table: dict) -> None:
    kernels = []
    for layer in net.layers:
        found, reasons = candidates(layer, device)
        if not found:
            raise ValueError(f"body layer {layer.name!r} ({layer.op}) has no tactic on {device}: {reasons}")
        # bodies are not shape-checked at build: take the best tactic that runs any inputs (no fits() test)
        tac, cfg = next(((t, c) for t, c in found if t.fits is None), found[0])
        layer.tactic = tac.id(cfg)
        kernels.append(tac.build(layer, cfg, device))
    table[id(net)] = kernels


def _build(layer, cfg, device):
    table: dict = {}
    for value in layer.attrs.values():
        if isinstance(value, Network):
            _prepare(value, device, table)
    fn, attrs, n = get_spec(layer.op).reference, layer.attrs, len(layer.outputs)

    def run(inputs):
        with body_kernels(table):
            return as_outputs(fn(*inputs, **attrs), n)
    return run


for _op in _OPS:
    tactic(_op, name="subnetwork", priority=0)(type(f"Subnetwork{_op}", (), {
        "supports": staticmethod(lambda layer, device: None), "build": staticmethod(_build)}))
