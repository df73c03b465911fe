"""The dynamo backend "tensorforge": torch.compile(model, backend="tensorforge", options={"fp16": True}).

Dynamo hands over a torch-level FX graph whose parameters are graph inputs; it is exported to aten ops
(torch.export on the graph module at the example inputs), parameters and buffers are recognised by their
dynamo source and become engine constants (so constant folding and the conv+BN, epilogue, attention and
LayerNorm rules see weights, exactly as on the ONNX path), and partition.py splits off what cannot be
converted. The call path is runner.py's EngineCall (CUDA graphs with bound inputs). The report of the last
compiled graph is `last_report()`; every break is logged. A graph with symbolic sizes gets one engine with an
optimization profile (dynamic.py); one whose sizes cannot be carried symbolically gets an engine per concrete
input shape, built on that shape's first call (the reason logged).
"""

import torch
import torch.utils._pytree as pytree

from ..util.errors import UsageError
from ..util.log import get_logger
from . import dynamic
from .functional import export_functional
from .partition import Report, build_options, lower_graph
from .runner import EngineCall

_REPORTS: list[Report] = []
_SHAPE_OPTIONS = ("min_shapes", "opt_shapes", "max_shapes")


def last_report() -> Report | None:
    return _REPORTS[-1] if _REPORTS else None


def reports() -> list[Report]:
    return list(_REPORTS)


def _is_param_or_buffer(node) -> bool:
    """A placeholder dynamo made for a module's parameter or registered buffer (an nn.Parameter, or a source chain
    through dynamo's parameter/buffer source). A plain tensor attribute (`self.t = tensor`) is not: dynamo guards
    it by shape, not identity, so a new tensor there reuses the graph and must be fed, not baked in."""
    grapharg = node.meta.get("grapharg")
    if isinstance(getattr(grapharg, "example", None), torch.nn.Parameter):
        return True
    source = getattr(grapharg, "source", None)
    while source is not None:
        if "ParamBuffer" in type(source).__name__:
            return True
        source = getattr(source, "base", None)
    return False


def module_state(gm) -> set[int]:
    """Positions of the placeholders that are module state. Read when dynamo hands the graph over: dynamo drops
    the placeholders' source records afterwards, and a later (re)build must still know them."""
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return {i for i, n in enumerate(phs) if _is_param_or_buffer(n)}


def _lower(gm, example_inputs, options, state: set[int], ranges=None, dims=None):
    """Export dynamo's graph (symbolically over `ranges` when given) and lower it: runner(*dynamo_args).
    `state`: the positions of module state among the arguments (module_state), which become engine constants."""
    dyn_phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if ranges:
        ep, keep, to_ours = dynamic.export_symbolic(gm, example_inputs, ranges, dims)
        points = {k: {theirs: ranges[ours][j] for theirs, ours in to_ours.items()}
                  for j, k in enumerate(("min", "opt", "max"))}
    else:
        with torch._guards.tracing(None):       # outside dynamo's tracing context: its guards must not grow
            ep = export_functional(gm, tuple(example_inputs))
        keep, points = list(range(len(dyn_phs))), None
    phs = [n.name for n in ep.graph_module.graph.nodes if n.op == "placeholder"]
    specs = ep.graph_signature.input_specs
    user = [name for name, s in zip(phs, specs) if s.kind.name == "USER_INPUT"]
    constants, slots = {}, {}                       # export-lifted constants, and module state dynamo passes in
    for name, s in zip(phs, specs):
        if s.kind.name != "USER_INPUT":
            value = ep.state_dict[s.target] if s.target in ep.state_dict else ep.constants[s.target]
            constants[name] = slots[name] = value.detach()
    position = {}                                   # export placeholder → position among dynamo's arguments
    for name, i in zip(user, keep):
        position[name] = i
        ex = example_inputs[i]
        if isinstance(ex, torch.Tensor) and i in state:
            constants[name] = ex.detach()
    runner, report = lower_graph(ep.graph_module, constants, options, example_inputs, points)
    _REPORTS.append(report)
    if isinstance(runner, EngineCall):              # one engine: called with dynamo's arguments as they come
        names = [f"<arg {i}>" for i in range(len(dyn_phs))]
        for name, i in position.items():
            names[i] = name
        call = EngineCall(runner.engine, names, runner.feeds, runner.outputs, runner.as_tuple)
        report.calls = [call]
    else:                                           # engines and PyTorch ops: the split graph's own arguments
        order = [(None, slots[n]) if n in slots else (position[n], None) for n in phs]

        def call(*args):
            return runner(*[args[i] if i is not None else v for i, v in order])
    return _wrap_outputs(call, ep.call_spec.out_spec)


def _wrap_outputs(call, out_spec):
    n = out_spec.num_leaves
    if pytree.tree_unflatten(list(range(n)), out_spec) == tuple(range(n)):      # a flat tuple: dynamo's usual
        if isinstance(call, EngineCall) and call.as_tuple:
            return call                                 # it returns that tuple itself: no wrapper per call
        if n == 1:
            return lambda *args: (_first(call(*args)),)
        return lambda *args: tuple(call(*args))

    def unflatten(*args):
        flat = call(*args)
        return pytree.tree_unflatten(list(flat) if isinstance(flat, (tuple, list)) else [flat], out_spec)
    return unflatten


def _first(flat):
    return flat[0] if isinstance(flat, (tuple, list)) else flat


def tensorforge_backend(gm: torch.fx.GraphModule, example_inputs, options: dict | None = None):
    options = dict(options or {})
    shapes = {k: options.pop(k) for k in _SHAPE_OPTIONS if k in options}
    build_options(options, example_inputs)          # unknown options fail here, before any export
    state = module_state(gm)
    if not dynamic.is_dynamic(gm):
        if shapes:
            get_logger().info("tensorforge: min/opt/max_shapes apply to graphs dynamo makes dynamic; this one is "
                              "static (pass dynamic=True to torch.compile, or torch._dynamo.mark_dynamic)")
        return _lower(gm, example_inputs, options, state)
    def lower(args, ranges, dims):
        return _lower(gm, args, options, state, ranges, dims)
    try:
        return dynamic.DynamicGraph(gm, example_inputs, options, shapes, state, lower)
    except dynamic.NotSymbolic as e:
        reason = str(e)
    except UsageError:
        raise
    except Exception as e:  # noqa: BLE001 - a symbolic export, conversion or build that fails falls back, with its reason
        reason = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"
    get_logger().warning(f"tensorforge: dynamic graph kept at static shapes ({reason}); one engine is built per "
                         "input shape, on its first call")
    return _per_shape(gm, options, state)


def _per_shape(gm, options, state):
    built: dict = {}

    def run(*args):
        key = tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else a for a in args)
        if key not in built:
            get_logger().info(f"tensorforge: building an engine for input shapes "
                              f"{[k[0] for k in key if isinstance(k, tuple)]} (dynamic graph)")
            built[key] = _lower(gm, args, options, state)
        return built[key](*args)
    return run


def register() -> None:
    """Make backend="tensorforge" known to dynamo (idempotent)."""
    from torch._dynamo.backends.registry import _BACKENDS, register_backend
    if "tensorforge" not in _BACKENDS:
        register_backend(tensorforge_backend, name="tensorforge")
