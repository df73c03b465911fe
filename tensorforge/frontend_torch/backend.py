"""The dynamo backend "tensorforge": torch.compile(model, backend="tensorforge", options={"fp16": True}).

Dynamo hands over a torch-level FX graph whose parameters are graph inputs; it is exported to aten ops
(torch.export on the graph module at the example inputs), parameters and buffers are recognised by their
dynamo source and become engine constants, and partition.py splits off what cannot be converted. The report
of the last compiled graph is `last_report()`; every break is logged. Graphs with symbolic (dynamic) shapes
are left to PyTorch whole, and that is logged and reported too.
"""

import torch
import torch.utils._pytree as pytree

from ..util.log import get_logger
from .partition import Report, lower_graph

_REPORTS: list[Report] = []


def last_report() -> Report | None:
    return _REPORTS[-1] if _REPORTS else None


def reports() -> list[Report]:
    return list(_REPORTS)


def _is_param_or_buffer(node) -> bool:
    source = getattr(node.meta.get("grapharg"), "source", None)
    while source is not None:
        if "ParamBuffer" in type(source).__name__ or "NNModule" in type(source).__name__:
            return True
        source = getattr(source, "base", None)
    return False


def tensorforge_backend(gm: torch.fx.GraphModule, example_inputs, options: dict | None = None):
    if any(not isinstance(a, torch.Tensor) or any(not isinstance(d, int) for d in a.shape) for a in example_inputs):
        report = Report(breaks=[("graph", "graph", "symbolic (dynamic) shapes: the whole graph stays in PyTorch")])
        get_logger().warning("tensorforge: a graph with dynamic shapes runs in PyTorch "
                             "(use torch.compile(..., dynamic=False))")
        _REPORTS.append(report)
        return gm.forward
    dyn_phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    ep = torch.export.export(gm, tuple(example_inputs))
    phs = [n.name for n in ep.graph_module.graph.nodes if n.op == "placeholder"]
    constants = {name: ex.detach() for name, node, ex in zip(phs, dyn_phs, example_inputs) if _is_param_or_buffer(node)}
    runner, report = lower_graph(ep.graph_module, constants, options, example_inputs)
    _REPORTS.append(report)
    out_spec = ep.call_spec.out_spec

    def run(*args):
        flat = runner(*args)
        return pytree.tree_unflatten(list(flat) if isinstance(flat, (tuple, list)) else [flat], out_spec)
    return run


def register() -> None:
    """Make backend="tensorforge" known to dynamo (idempotent)."""
    from torch._dynamo.backends.registry import _BACKENDS, register_backend
    if "tensorforge" not in _BACKENDS:
        register_backend(tensorforge_backend, name="tensorforge")
