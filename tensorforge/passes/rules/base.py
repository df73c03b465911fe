"""Fusion rules: the Rule contract and the runner that applies a rule everywhere it matches.

A rule has a math-notation `name`, a declarative `pattern` (passes/pattern.py) rooted at the layer whose
output the fusion replaces, a `check(match, graph) -> reason | None` for what a pattern cannot say (shapes,
axes, dtypes), and `rewrite(match, graph) -> [Layer]` that returns the replacement layers (the last one
producing the root's output tensor). The runner tries roots consumers first (the largest match wins), skips
overlaps, splices replacements in at the root's position (topological order holds: every replacement input is
produced before the root), and keeps every rejection with its reason (logged at --verbose).
Entry point: `rule_pass(*rules)` → a pipeline pass `fn(net, shape_points=..., **options) -> changes`.
"""

from dataclasses import dataclass

from ...ir import Layer, Network, TensorInfo
from ...util.log import get_logger
from ..dead_code import remove_dead_layers
from ..pattern import Graph, Match, Pattern


@dataclass
class Rejection:
    rule: str
    layer: str
    reason: str

    def __str__(self) -> str:
        return f"rule {self.rule}: not applied at {self.layer!r}: {self.reason}"


def record_rejection(rule_name: str, layer_name: str, reason: str, rejections: list | None) -> None:
    """Log why `rule_name` did not apply at `layer_name` (--verbose) and keep it in `rejections` when given: the
    reporting of the passes that match by hand instead of through a pattern."""
    rej = Rejection(rule_name, layer_name, reason)
    get_logger().verbose(str(rej))
    if rejections is not None:
        rejections.append(rej)


def splice_layers(net: Network, replace: dict[int, Layer], drop: set[int], rule_name: str) -> int:
    """The hand-matched passes' rewrite: each layer whose id is in `replace` gives way to its replacement at its
    position, the layers in `drop` go, the replacements' outputs are registered; returns len(replace)."""
    if not replace:
        return 0
    net.layers = [replace.get(id(layer), layer) for layer in net.layers if id(layer) not in drop]
    for layer in replace.values():
        for o in layer.outputs:
            if o:
                net.tensors.setdefault(o, TensorInfo(o))
    net.prune_tensors()
    get_logger().verbose(f"rule {rule_name}: applied {len(replace)} time(s)")
    return len(replace)


class Rule:
    name: str = ""
    pattern: Pattern
    anchor: str | set[str] | None = None   # a failed partial match is reported only if it reached this op
    roots: set[str] | None = None  # ops tried as the root (default: the pattern's own root ops)

    def check(self, m: Match, g: Graph) -> str | None:
        return None

    def rewrite(self, m: Match, g: Graph) -> list[Layer]:
        raise NotImplementedError

    # helpers for rewrite()
    @staticmethod
    def new_layer(g: Graph, m: Match, op: str, inputs: list[str], outputs: list[str] | None = None,
                  attrs: dict | None = None, suffix: str = "") -> Layer:
        """A layer named after the root, carrying the ONNX origins of every matched layer. outputs=None:
        the root's output."""
        net = g.net
        name = net.unique_name(f"{m.root.name}{suffix or '/' + op.lower()}")
        origin = []
        for layer in reversed(m.layers):
            origin += [o for o in layer.origin if o not in origin]
        return Layer(name, op, list(inputs), list(outputs or [m.root.outputs[0]]), dict(attrs or {}), origin)

    @staticmethod
    def fresh_tensor(g: Graph, base: str) -> str:
        """A new tensor name (registered, so later names cannot collide with it)."""
        name = g.net.unique_name(base)
        g.net.tensors[name] = TensorInfo(name)
        return name


def _report(rule: Rule, layer: Layer, reason: str, reached: tuple, rejections: list | None, seen: set) -> None:
    anchors = {rule.anchor} if isinstance(rule.anchor, str) else rule.anchor
    if anchors is not None and layer.op not in anchors and not any(x.op in anchors for x in reached):
        return
    key = (rule.name, layer.name, reason)
    if key in seen:
        return
    seen.add(key)
    rej = Rejection(rule.name, layer.name, reason)
    get_logger().verbose(str(rej))
    if rejections is not None:
        rejections.append(rej)


def apply_rule(net: Network, rule: Rule, shape_points: list[dict], rejections: list | None = None,
               max_fold_elements: int = 1 << 24, max_sweeps: int = 8) -> int:
    """Apply `rule` until it no longer matches; returns the number of rewrites."""
    total, seen = 0, set()
    roots = rule.roots or rule.pattern.root_ops()
    for _ in range(max_sweeps):
        g = Graph(net, shape_points, max_fold_elements)
        consumed: set[int] = set()
        replacements: dict[int, list[Layer]] = {}
        for layer in reversed(net.layers):      # consumers first: the largest match wins
            if layer.op not in roots or id(layer) in consumed or not layer.outputs:
                continue
            m, why, reached = rule.pattern.match_layer(g, layer)
            if m is None:
                _report(rule, layer, why, reached, rejections, seen)
                continue
            if any(id(x) in consumed for x in m.layers):
                continue
            why = m.escapes(g) or rule.check(m, g)
            if why:
                _report(rule, layer, why, tuple(m.layers), rejections, seen)
                continue
            replacements[id(layer)] = rule.rewrite(m, g)
            consumed.update(id(x) for x in m.layers)
        if not replacements:
            break
        kept: list[Layer] = []
        for layer in net.layers:
            if id(layer) in replacements:
                kept.extend(replacements[id(layer)])
            elif id(layer) not in consumed:
                kept.append(layer)
        for layer in kept:
            for o in layer.outputs:
                if o and o not in net.tensors:
                    net.tensors[o] = TensorInfo(o)
        net.layers = kept
        remove_dead_layers(net)          # readers of the replaced layers' shapes (Shape → Reshape) go too
        total += len(replacements)
        get_logger().verbose(f"rule {rule.name}: applied {len(replacements)} time(s)")
    net.prune_tensors()
    return total


def rule_pass(*rules: Rule):
    """A pipeline pass applying `rules` in order: fn(net, shape_points=..., rejections=None, ...) -> changes."""
    def run(net: Network, shape_points: list[dict] | None = None, rejections: list | None = None,
            max_fold_elements: int = 1 << 24, **_) -> int:
        return sum(apply_rule(net, r, shape_points or [], rejections, max_fold_elements) for r in rules)
    run.__doc__ = "; ".join(r.name for r in rules)
    return run


def reduction_axes(g: Graph, layer: Layer) -> tuple[list[int] | None, str | None]:
    """The sorted, non-negative axes a Reduce* layer reduces, or (None, reason). Requires keepdims=1 and
    constant axes (the IR's ReduceX(data, axes) form)."""
    rank = g.rank(layer.inputs[0])
    if rank is None:
        return None, f"the rank of {layer.inputs[0]!r} is unknown"
    if not layer.attrs.get("keepdims", 1):
        return None, f"{layer.op} {layer.name!r} drops the reduced axes (keepdims=0)"
    axes_name = layer.inputs[1] if len(layer.inputs) > 1 else ""
    if not axes_name:
        if layer.attrs.get("noop_with_empty_axes", 0):
            return None, f"{layer.op} {layer.name!r} reduces nothing"
        return list(range(rank)), None
    axes = g.constant(axes_name)
    if axes is None:
        return None, f"the axes of {layer.op} {layer.name!r} are computed at run time"
    return sorted({int(a) % rank for a in axes.reshape(-1).tolist()}), None
