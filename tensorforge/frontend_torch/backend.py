"""The dynamo backend "tensorforge": torch.compile(model, backend="tensorforge", options={"fp16": True}).

Dynamo hands over a torch-level FX graph whose parameters are graph inputs; it is exported to aten ops
(torch.export on the graph module at the example inputs), parameters and buffers are recognised by their
dynamo source and become engine constants, and partition.py splits off what cannot be converted. The report
of the last compiled graph is `last_report()`; every break is logged. Engines have static shapes: when dynamo
hands over a graph with symbolic sizes (after it saw a second shape), an engine is built per concrete input
shape on its first call and kept (one build per shape; `dynamic=False` makes dynamo do the same per shape).
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


def _lower(gm, example_inputs, options):
    """Export dynamo's graph at these (concrete) inputs and lower it: (runner, out_spec)."""
    dyn_phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    ep = torch.export.export(gm, tuple(example_inputs))
    phs = [n.name for n in ep.graph_module.graph.nodes if n.op == "placeholder"]
    constants = {name: ex.detach() for name, node, ex in zip(phs, dyn_phs, example_inputs)
                 if isinstance(ex, torch.Tensor) and _is_param_or_buffer(node)}
    runner, report = lower_graph(ep.graph_module, constants, options, example_inputs)
    _REPORTS.append(report)
    return runner, ep.call_spec.out_spec


def _call(runner, out_spec, args):
    flat = runner(*args)
    return pytree.tree_unflatten(list(flat) if isinstance(flat, (tuple, list)) else [flat], out_spec)


def _symbolic(example_inputs) -> bool:
    return any(not isinstance(a, torch.Tensor) or any(not isinstance(d, int) for d in a.shape)
               for a in example_inputs)


def tensorforge_backend(gm: torch.fx.GraphModule, example_inputs, options: dict | None = None):
    if not _symbolic(example_inputs):
        runner, out_spec = _lower(gm, example_inputs, options)
        return lambda *args: _call(runner, out_spec, args)
    # dynamo made some sizes symbolic (a second shape was seen): engines are static-shape, so one is built per
    # concrete input-shape signature on its first call, and kept
    built: dict = {}

    def run(*args):
        key = tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else a for a in args)
        if key not in built:
            get_logger().info(f"tensorforge: building an engine for input shapes "
                              f"{[k[0] for k in key if isinstance(k, tuple)]} (dynamic graph)")
            built[key] = _lower(gm, args, options)
        return _call(*built[key], args)
    return run


def register() -> None:
    """Make backend="tensorforge" known to dynamo (idempotent)."""
    from torch._dynamo.backends.registry import _BACKENDS, register_backend
    if "tensorforge" not in _BACKENDS:
        register_backend(tensorforge_backend, name="tensorforge")
