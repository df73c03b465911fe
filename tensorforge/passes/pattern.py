"""A small declarative matcher for fusion rules: op patterns, commutative operands, associative
products/sums, and constant predicates with tolerance.

    x = Var("x")
    gelu = Product(x, Const(0.5), Sum(Const(1.0), Op("Erf", AnyOf(Op("Div", x, Const(SQRT2)),
                                                                    Product(x, Const(1 / SQRT2))))))
    match, why = gelu.match_layer(graph, layer)       # Match, or None and the deepest failure's reason

A pattern is matched against a tensor, walking from consumers to producers. `Var` binds a tensor (a
second occurrence must be the same tensor); `Op` checks the producing layer's op, attributes and inputs
(two-input commutative ops try both orders); `Product`/`Sum` flatten a tree of Mul/Add layers and match
their leaves in any order; `Const` accepts a constant whose every element is close to a value.
`Graph` is the read-only view rules see: producers, consumers, constants, shapes at every profile point.
"""

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch

from ..ir import Layer, Network
from ..ir.dynamic import placeholder_info
from ..ir.interpret import propagate

COMMUTATIVE = {"Add", "Mul", "Max", "Min", "Sum", "And", "Or", "Xor", "Equal"}


# ---- the graph view ---------------------------------------------------------------------------------
class Graph:
    """Producers/consumers/constants of a network, and (lazily) its tensors' shapes at every shape point."""

    def __init__(self, net: Network, shape_points: list[dict] | None = None, max_fold_elements: int = 1 << 24):
        self.net = net
        self.points = shape_points or []
        self.max_fold = max_fold_elements
        self.producer_of = net.producers()
        self.users = net.consumers()
        self._envs: list[dict] | None = None
        self.shape_error: str | None = None

    def producer(self, name: str) -> Layer | None:
        return self.producer_of.get(name)

    def consumers(self, name: str) -> list[Layer]:
        return self.users.get(name, [])

    def constant(self, name: str) -> torch.Tensor | None:
        return self.net.constants.get(name) if name else None

    def is_output(self, name: str) -> bool:
        return name in self.net.outputs

    def _environments(self) -> list[dict]:
        if self._envs is None:
            self._envs = []
            try:
                self._envs = [propagate(self.net, p, self.max_fold) for p in self.points]
            except Exception as e:  # noqa: BLE001 - shapes are optional for rules; the builder reports the failure
                self.shape_error = f"{type(e).__name__}: {e}"
        return self._envs

    def values(self, name: str) -> list[torch.Tensor] | None:
        """The tensor (meta or real) at every shape point, or None when unknown (data-dependent shapes too)."""
        envs = self._environments()
        if not envs or any(name not in env or env[name] is None or placeholder_info(env[name]) for env in envs):
            return None
        return [env[name] for env in envs]

    def shape(self, name: str) -> tuple[int, ...] | None:
        """Static dims as ints, dims that differ between shape points as -1; None when unknown."""
        ts = self.values(name)
        if ts is None or len({t.dim() for t in ts}) != 1:
            return None
        return tuple(int(ts[0].shape[d]) if all(t.shape[d] == ts[0].shape[d] for t in ts) else -1
                     for d in range(ts[0].dim()))

    def same_shape(self, a: str, b: str) -> bool:
        """True when a and b have equal shapes at every shape point."""
        ta, tb = self.values(a), self.values(b)
        return ta is not None and tb is not None and all(x.shape == y.shape for x, y in zip(ta, tb))

    def dtype(self, name: str) -> torch.dtype | None:
        if name in self.net.constants:
            return self.net.constants[name].dtype
        ts = self.values(name)
        return ts[0].dtype if ts else self.net.tensors[name].dtype if name in self.net.tensors else None

    def rank(self, name: str) -> int | None:
        s = self.shape(name)
        return None if s is None else len(s)


# ---- match state --------------------------------------------------------------------------------------
@dataclass
class State:
    binds: dict[str, Any] = field(default_factory=dict)
    layers: tuple[Layer, ...] = ()

    def bind(self, name: str, value) -> "State":
        return State({**self.binds, name: value}, self.layers)

    def add(self, layer: Layer) -> "State":
        return self if any(layer is x for x in self.layers) else State(self.binds, self.layers + (layer,))


class _Ctx:
    def __init__(self, g: Graph):
        self.g = g
        self.best: tuple[int, str, tuple[Layer, ...]] = (-1, "", ())

    def fail(self, st: State, msg: str) -> None:
        if len(st.layers) >= self.best[0]:
            self.best = (len(st.layers), msg, st.layers)


@dataclass
class Match:
    root: Layer
    binds: dict[str, Any]
    layers: list[Layer]          # every matched layer, root first

    def __getitem__(self, name: str):
        return self.binds[name]

    def get(self, name: str, default=None):
        return self.binds.get(name, default)

    def escapes(self, g: Graph) -> str | None:
        """A reason when an intermediate result (not the root's) is also needed outside the match."""
        inside = {id(layer) for layer in self.layers}
        for layer in self.layers:
            if layer is self.root:
                continue
            for out in layer.outputs:
                if g.is_output(out):
                    return f"intermediate {out!r} is a network output"
                for user in g.consumers(out):
                    if id(user) not in inside:
                        return f"intermediate {out!r} is also read by layer {user.name!r} ({user.op})"
        return None


# ---- patterns -------------------------------------------------------------------------------------------
class Pattern:
    def match(self, ctx: _Ctx, t: str, st: State) -> Iterator[State]:
        raise NotImplementedError

    def match_layer(self, g: Graph, layer: Layer) -> tuple[Match | None, str, tuple[Layer, ...]]:
        """Match with `layer` as the root: (Match, "", ()) or (None, deepest reason, layers matched there)."""
        ctx = _Ctx(g)
        for st in self.match(ctx, layer.outputs[0], State()):
            if st.layers and st.layers[0] is layer:
                return Match(layer, st.binds, list(st.layers)), "", ()
        return None, ctx.best[1], ctx.best[2]

    def root_ops(self) -> set[str]:
        raise NotImplementedError


class Var(Pattern):
    """Any tensor (that satisfies `pred(graph, name) -> reason | None`); binds `name`."""

    def __init__(self, name: str, pred: Callable[[Graph, str], str | None] | None = None):
        self.name, self.pred = name, pred

    def match(self, ctx, t, st):
        if not t:
            ctx.fail(st, f"{self.name}: input is absent")
            return
        if self.name in st.binds:
            if st.binds[self.name] == t:
                yield st
            else:
                ctx.fail(st, f"{self.name}: expected the same tensor {st.binds[self.name]!r}, found {t!r}")
            return
        why = self.pred(ctx.g, t) if self.pred else None
        if why:
            ctx.fail(st, f"{self.name}: {why}")
            return
        yield st.bind(self.name, t)


def _tolerance(dtype: torch.dtype) -> float:
    return 2 * torch.finfo(dtype).eps + 1e-12 if dtype.is_floating_point else 0.0


class Const(Pattern):
    """A constant tensor. `value`: every element ≈ value (|c − v| ≤ rtol·|v| + atol; rtol defaults to two
    units in the last place of the constant's dtype); `pred(tensor) -> reason | None` for anything else;
    `scalar`: exactly one element. Binds `name` (the tensor name) and `name + ".value"` (the tensor)."""

    def __init__(self, value: float | None = None, name: str | None = None, rtol: float | None = None,
                 atol: float = 0.0, scalar: bool = True, pred: Callable[[torch.Tensor], str | None] | None = None):
        self.value, self.name, self.rtol, self.atol, self.scalar, self.pred = value, name, rtol, atol, scalar, pred

    def match(self, ctx, t, st):
        c = ctx.g.constant(t)
        what = f"constant ≈{self.value:g}" if self.value is not None else "a constant"
        if c is None:
            ctx.fail(st, f"expected {what}, found computed tensor {t!r}")
            return
        if self.scalar and c.numel() != 1:
            ctx.fail(st, f"expected a single-element {what}, found shape {tuple(c.shape)}")
            return
        if self.value is not None:
            if c.numel() == 0 or c.dtype == torch.bool:
                ctx.fail(st, f"expected {what}, found {c.dtype} of {c.numel()} elements")
                return
            v = c.double()
            rtol = self.rtol if self.rtol is not None else _tolerance(c.dtype)
            err = (v - self.value).abs().max().item()
            if not err <= rtol * abs(self.value) + self.atol:
                ctx.fail(st, f"expected {what} (tolerance {rtol:.1e}), found {v.flatten()[0].item():.9g}")
                return
        if self.pred is not None:
            why = self.pred(c)
            if why:
                ctx.fail(st, why)
                return
        yield st.bind(self.name, t).bind(self.name + ".value", c) if self.name else st


class Op(Pattern):
    """A tensor produced by a layer of op `op` (or one of several: "Div|Mul"), output `out` of it.
    `attrs`: name → required value or predicate(value) -> bool; `inputs`: one pattern per input (trailing
    absent inputs ignored), or None to accept any inputs; `name` binds the layer."""

    def __init__(self, op: str, *inputs: Pattern, attrs: dict | None = None, name: str | None = None, out: int = 0,
                 any_inputs: bool = False):
        self.ops = set(op.split("|"))
        self.inputs, self.attrs, self.name, self.out, self.any_inputs = list(inputs), attrs or {}, name, out, any_inputs

    def root_ops(self):
        return set(self.ops)

    def match(self, ctx, t, st):
        layer = ctx.g.producer(t)
        want = "|".join(sorted(self.ops))
        if layer is None:
            ctx.fail(st, f"expected {want} producing {t!r}, found a network input or constant")
            return
        if layer.op not in self.ops:
            ctx.fail(st, f"expected {want} producing {t!r}, found {layer.op} ({layer.name!r})")
            return
        if layer.outputs.index(t) != self.out:
            ctx.fail(st, f"{t!r} is output {layer.outputs.index(t)} of {layer.name!r}, expected output {self.out}")
            return
        for key, want_v in self.attrs.items():
            have = layer.attrs.get(key)
            ok = want_v(have) if callable(want_v) else have == want_v
            if not ok:
                ctx.fail(st, f"{layer.op} {layer.name!r}: attribute {key}={have!r} does not fit")
                return
        st = st.add(layer)
        if self.name:
            st = st.bind(self.name, layer)
        if self.any_inputs:
            yield st
            return
        ins = list(layer.inputs)
        while ins and not ins[-1]:
            ins.pop()
        if len(ins) != len(self.inputs):
            ctx.fail(st, f"{layer.op} {layer.name!r} has {len(ins)} inputs, the pattern expects {len(self.inputs)}")
            return
        orders = [ins]
        if layer.op in COMMUTATIVE and len(ins) == 2 and ins[0] != ins[1]:
            orders.append(ins[::-1])
        for order in orders:
            yield from _match_seq(ctx, self.inputs, order, st)


def _match_seq(ctx, patterns, tensors, st):
    if not patterns:
        yield st
        return
    for st2 in patterns[0].match(ctx, tensors[0], st):
        yield from _match_seq(ctx, patterns[1:], tensors[1:], st2)


class AnyOf(Pattern):
    """The first alternative that matches (later ones are tried on backtracking)."""

    def __init__(self, *alternatives: Pattern):
        self.alternatives = alternatives

    def root_ops(self):
        return set().union(*(a.root_ops() for a in self.alternatives))

    def match(self, ctx, t, st):
        for alt in self.alternatives:
            yield from alt.match(ctx, t, st)


class _Assoc(Pattern):
    """A tree of `op` layers (associative, commutative) whose leaves match `terms` in any order. Interior
    layers other than the root must have a single consumer (they disappear in the rewrite)."""

    op = ""

    def __init__(self, *terms: Pattern):
        self.terms = terms

    def root_ops(self):
        return {self.op}

    def _leaves(self, ctx, t, layers, top):
        layer = ctx.g.producer(t)
        single = top or (len(ctx.g.consumers(t)) == 1 and not ctx.g.is_output(t))
        if layer is not None and layer.op == self.op and len(layer.inputs) == 2 and single:
            layers.append(layer)
            return self._leaves(ctx, layer.inputs[0], layers, False) + self._leaves(ctx, layer.inputs[1], layers, False)
        return [t]

    def match(self, ctx, t, st):
        layer = ctx.g.producer(t)
        if layer is None or layer.op != self.op:
            ctx.fail(st, f"expected {self.op} producing {t!r}, found {layer.op if layer else 'an input or constant'}")
            return
        layers: list[Layer] = []
        leaves = self._leaves(ctx, t, layers, True)
        for lay in layers:
            st = st.add(lay)
        if len(leaves) != len(self.terms):
            ctx.fail(st, f"{self.op} tree at {layer.name!r} has {len(leaves)} operands, the pattern expects "
                         f"{len(self.terms)}")
            return
        seen = set()
        for perm in itertools.permutations(range(len(leaves))):
            key = tuple(leaves[i] for i in perm)
            if key in seen:
                continue
            seen.add(key)
            yield from _match_seq(ctx, list(self.terms), list(key), st)


class Product(_Assoc):
    """a·b·c… in any association and order (a tree of Mul layers)."""
    op = "Mul"


class Sum(_Assoc):
    """a+b+c… in any association and order (a tree of Add layers)."""
    op = "Add"
