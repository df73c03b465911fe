"""Plugins as tactics: every registered plugin gets a tactic `plugin` on its IR op, one config per @autotune entry.

    plugin:custom::mygelu:1.plugin[BLOCK=1024,num_warps=4]      ← a tactic id in the timing cache and the engine

The builder times these candidates like any other tactic (and the generic `torch_ref` tactic, which runs the
plugin's @reference, stays available beside them at the lowest priority). The kernel calls `Plugin.run`: outputs
are allocated from the descriptor, then the plugin's @impl writes them (Triton on CUDA, torch on CPU).
The plugin room may not import kernels, so this module subscribes to the plugin registry and keeps the tactic
table in step with registrations, changes (@impl/@autotune added later) and removals.
"""

from ..ir.interpret import as_outputs
from ..plugin import Plugin, by_op, subscribe
from .registry import _TACTICS, Tactic

NAME = "plugin"
PRIORITY = 10          # above the generic torch_ref tactic: the plugin's own impl wins when nothing is timed


def _supports(layer, device):
    p = by_op(layer.op)
    if p is None:
        return f"plugin op {layer.op} is not registered"
    if p.impl_fn is None:
        return f"plugin {p.id} has no @impl (its @reference runs through torch_ref)"
    return None


def _build(layer, cfg, device):
    p = by_op(layer.op)
    attrs, n = dict(layer.attrs), len(layer.outputs)

    def run(inputs):
        return as_outputs(p.run(inputs, attrs, cfg), n)
    return run


def _sync(p: Plugin, present: bool) -> None:
    """Replace the plugin's tactic entry (configs may have changed) or drop it when the plugin is removed."""
    # _TACTICS is the kernels room's own table; the public `tactic` decorator cannot replace an entry.
    others = [t for t in _TACTICS.get(p.op_name, []) if t.name != NAME]
    if present:
        others.append(Tactic(op=p.op_name, name=NAME, supports=_supports, build=_build, configs=list(p.configs()),
                             priority=PRIORITY))
    if others:
        _TACTICS[p.op_name] = others
    else:
        _TACTICS.pop(p.op_name, None)


subscribe(_sync)
