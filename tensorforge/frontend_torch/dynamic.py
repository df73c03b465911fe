"""Graphs dynamo made dynamic: one engine with an optimization profile over the dims' range, reused across shapes.

    runner = DynamicGraph(gm, example_inputs, options, shapes, lower)     # shapes: min/opt/max_shapes options
    runner(*dynamo_args)

Dynamo hands over a graph with symbolic sizes after it has seen a second shape (or at once, with dynamic=True or
torch._dynamo.mark_dynamic): FakeTensor dims s0, s1 … and SymInt placeholders for the sizes the graph computes
with. Those placeholders are replaced by `x.size(d)` of an input that carries the symbol, the graph is exported with
the dims dynamic (torch.export Dims over the range), the converters write dynamic dims as run-time shape inputs,
and the engine gets one profile, per dynamic dim:
    min: `min_shapes` option, else the symbol's lower bound in dynamo's shape env (2: dynamo specialises 0 and 1)
    max: `max_shapes` option, else the symbol's upper bound when finite, else the next power of two ≥ 2 × the size
    opt: `opt_shapes` option, else the size of this first call.
A call outside the profile rebuilds once with the range widened to cover it (logged). `min_shapes`/`opt_shapes`/
`max_shapes` are one shape per tensor input of the graph, in order (a single shape for a one-input graph).
"""

import torch
import torch.fx

from ..util.errors import UsageError
from ..util.log import get_logger
from .functional import export_functional


class NotSymbolic(Exception):
    """The graph's dynamic sizes cannot be carried symbolically (an expression, not a plain symbol, as a dim)."""


def _sym(d):
    return None if isinstance(d, int) else d.node.expr


def is_dynamic(gm: torch.fx.GraphModule) -> bool:
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            ev = n.meta.get("example_value")
            if isinstance(ev, torch.SymInt) or (isinstance(ev, torch.Tensor) and any(_sym(d) is not None
                                                                                   for d in ev.shape)):
                return True
    return False


def _next_pow2(n: int) -> int:
    return 1 << max(0, int(n - 1).bit_length())


def _declared(shapes: dict, key: str, n_inputs: int):
    v = shapes.get(key)
    if v is None:
        return None
    if n_inputs == 1 and v and all(isinstance(d, int) for d in v):
        v = [v]
    if not isinstance(v, (list, tuple)) or len(v) != n_inputs:
        raise UsageError(f"option {key!r} must give one shape per tensor input of the graph ({n_inputs})",
                         f"e.g. {key}=[(1, 128)] for one input, in the order of the model's tensor arguments")
    return [tuple(int(d) for d in s) for s in v]


class DynamicGraph:
    """A dynamic dynamo graph: one engine (or a partitioned graph of engines) over a profile, rebuilt only when a
    call's sizes leave it. `state`: positions of module state among the arguments; `lower(args, ranges, dims)
    -> runner(*dynamo_args)`."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs, options: dict, shapes: dict, state: set, lower):
        self.lower = lower
        phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.tensor_pos = [i for i, n in enumerate(phs) if i not in state
                           and isinstance(n.meta.get("example_value"), torch.Tensor)]
        self.dims: dict = {}            # symbol → [(arg position, dim)]
        for i in self.tensor_pos:
            for d, size in enumerate(phs[i].meta["example_value"].shape):
                expr = _sym(size)
                if expr is not None:
                    if not expr.is_Symbol:
                        raise NotSymbolic(f"input {phs[i].name} dim {d} is the expression {expr}")
                    self.dims.setdefault(expr, []).append((i, d))
        for i, n in enumerate(phs):
            ev = n.meta.get("example_value")
            if isinstance(ev, torch.SymInt) and _sym(ev) not in self.dims:
                raise NotSymbolic(f"size argument {n.name} ({_sym(ev)}) is no dim of a tensor input")
        self.ranges = self._ranges(phs, example_inputs, shapes)
        self.builds = 0
        self._build(example_inputs)

    def _ranges(self, phs, example_inputs, shapes) -> dict:
        n = len(self.tensor_pos)
        declared = {k: _declared(shapes, k, n) for k in ("min_shapes", "opt_shapes", "max_shapes")}
        out = {}
        for sym, where in self.dims.items():
            i, d = where[0]
            seen = int(example_inputs[i].shape[d])
            vr = phs[i].meta["example_value"].shape[d].node.shape_env.var_to_range.get(sym)
            lo = int(vr.lower) if vr is not None and vr.lower.is_finite else 2
            hi = int(vr.upper) if vr is not None and vr.upper.is_finite and vr.upper < 2**31 else None
            k = self.tensor_pos.index(i)
            pick = lambda key: declared[key][k][d] if declared[key] is not None else None  # noqa: E731
            mn = pick("min_shapes") if pick("min_shapes") is not None else lo
            mx = pick("max_shapes") if pick("max_shapes") is not None else (hi or _next_pow2(2 * seen))
            opt = pick("opt_shapes") if pick("opt_shapes") is not None else seen
            if not mn <= opt <= mx or not mn <= seen <= mx:
                raise UsageError(f"dynamic dim {d} of graph input {phs[i].name}: size {seen} and the range "
                                 f"min {mn}, opt {opt}, max {mx} do not nest", "give min_shapes <= opt_shapes <= "
                                 "max_shapes that include the shapes you call with")
            out[sym] = [mn, opt, mx]
        return out

    def _build(self, args) -> None:
        self.runner = self.lower(args, self.ranges, self.dims)
        self.checks = [(i, d, r[0], r[2]) for sym, r in self.ranges.items() for i, d in self.dims[sym]]
        self.builds += 1

    def __call__(self, *args):
        for i, d, lo, hi in self.checks:
            size = args[i].shape[d]
            if not lo <= size <= hi:
                self._widen(args)
                break
        return self.runner(*args)

    def _widen(self, args) -> None:
        for sym, r in self.ranges.items():
            sizes = [int(args[i].shape[d]) for i, d in self.dims[sym]]
            r[0], r[1] = min(r[0], *sizes), max(r[1], min(sizes))
            r[2] = max(r[2], _next_pow2(max(sizes)))
        get_logger().info("tensorforge: a call's sizes leave the engine's profile; rebuilding with "
                          + ", ".join(f"{sym} in [{r[0]}, {r[2]}]" for sym, r in self.ranges.items()))
        self._build(args)


def export_symbolic(gm: torch.fx.GraphModule, args, ranges: dict, dims: dict):
    """torch.export of dynamo's graph with its dynamic dims as Dims over `ranges`, SymInt placeholders replaced by
    sizes of the inputs. Returns (exported program, positions of the kept args, {export symbol: dynamo symbol})."""
    graph = torch.fx.Graph()
    env: dict = {}
    graph.output(graph.graph_copy(gm.graph, env))
    first_of = {sym: where[0] for sym, where in dims.items()}
    phs = [n for n in graph.nodes if n.op == "placeholder"]
    keep = []
    last = phs[-1]
    for i, n in enumerate(phs):
        ev = n.meta.get("example_value")
        if isinstance(ev, torch.SymInt):
            j, d = first_of[_sym(ev)]
            with graph.inserting_after(last):
                size = graph.call_method("size", (phs[j], d))
            n.replace_all_uses_with(size)
            graph.erase_node(n)
        else:
            keep.append(i)
    lowered = torch.fx.GraphModule(gm, graph)
    examples = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
    dim_of = {sym: torch.export.Dim(f"d{k}", min=r[0], max=r[2]) for k, (sym, r) in enumerate(ranges.items())}
    spec = []
    for i in keep:
        ev = examples[i]
        if isinstance(ev, torch.Tensor):
            spec.append({d: dim_of[_sym(s)] for d, s in enumerate(ev.shape) if _sym(s) is not None} or None)
        else:
            spec.append(None)
    # export marks its example tensors dynamic (an attribute dynamo's guards read): give it detached aliases
    example = tuple(args[i].detach() if isinstance(args[i], torch.Tensor) else args[i] for i in keep)
    with torch._guards.tracing(None):       # not inside dynamo's tracing context: its guards must not grow
        ep = export_functional(lowered, example, dynamic_shapes=tuple(spec))
    ours = {}
    ep_phs = [n for n in ep.graph_module.graph.nodes if n.op == "placeholder"]
    users = [n for n, s in zip(ep_phs, ep.graph_signature.input_specs) if s.kind.name == "USER_INPUT"]
    for n, i in zip(users, keep):
        ev = examples[i]
        if isinstance(ev, torch.Tensor):
            for ours_d, theirs in zip(ev.shape, n.meta["val"].shape):
                if _sym(ours_d) is not None and _sym(theirs) is not None:
                    ours[_sym(theirs)] = _sym(ours_d)
    return ep, keep, ours
