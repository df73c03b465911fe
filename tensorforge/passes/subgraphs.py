"""The graph passes inside control-flow bodies, and an If whose condition is known at build time inlined.

`inline_constant_ifs(net)` (a pipeline pass, after constant folding): If(cond, *captured) with a constant cond
is replaced by the layers of the branch it takes, renamed into the enclosing network (body inputs → the
captured tensors, body constants → new constants, body outputs → the If's outputs), so the later fusion
passes see them as ordinary layers. `optimize_bodies(net, points, run)` calls `run(body, body_points)` (the
pipeline's `optimize` at the same level) on every If/Loop/Scan body, with shape points derived from the
enclosing network's: captured tensors and If operands have their outer shapes; Loop/Scan state has its
initial shape: a copy of the body is optimised under that assumption and kept only if it returns the state in
that shape (else the body is optimised without shape points: folding and the shape-dependent rules leave it). Nested bodies are reached through the recursion.
"""

import copy
from typing import Callable

import torch

from ..ir import Layer, Network, TensorInfo
from ..ir.dynamic import placeholder_info
from ..ir.interpret import propagate
from .constant_fold import fold_constants

_BODY_OPS = ("If", "Loop", "Scan")


def inline_constant_ifs(net: Network, shape_points: list[dict] | None = None, max_fold_elements: int = 1 << 24,
                        **_) -> int:
    """Inline every If with a constant condition, fold what the inlined branches made constant, repeat (an
    inlined branch's own If may now have a constant condition). Returns the number of Ifs inlined."""
    total = 0
    while True:
        kept: list[Layer] = []
        inlined = 0
        for layer in net.layers:
            cond = net.constants.get(layer.inputs[0]) if layer.op == "If" and layer.inputs[0] else None
            if cond is None or cond.numel() < 1:
                kept.append(layer)
                continue
            branch = layer.attrs["then_branch"] if bool(cond.reshape(-1)[0].item()) else layer.attrs["else_branch"]
            kept.extend(_inline(net, layer, branch))
            inlined += 1
        net.layers = kept
        net.prune_tensors()
        if not inlined:
            return total
        total += inlined
        fold_constants(net, shape_points or [], max_fold_elements)


def _inline(net: Network, layer: Layer, body: Network) -> list[Layer]:
    """The body's layers renamed into `net`, writing the If's outputs."""
    names = dict(zip(body.inputs, layer.inputs[1:]))
    for c, value in body.constants.items():
        names[c] = net.add_constant(net.unique_name(f"{layer.name}/{c}"), value)
    produced = {o for bl in body.layers for o in bl.outputs if o}
    targets: dict[str, str] = {}
    copies: list[tuple[str, str]] = []           # (body tensor, If output) written by an Identity
    for body_out, out in zip(body.outputs, layer.outputs):
        if not out:
            continue
        if body_out in produced and body_out not in targets:
            targets[body_out] = out
        else:
            copies.append((body_out, out))
    new: list[Layer] = []
    for bl in body.layers:
        outs = []
        for o in bl.outputs:
            if not o:
                outs.append("")
                continue
            if o not in targets:
                targets[o] = net.unique_name(f"{layer.name}/{o}")
                info = body.tensors.get(o)
                net.tensors[targets[o]] = TensorInfo(targets[o], info.dtype if info else None,
                                                     info.shape if info else None)
            names[o] = targets[o]
            outs.append(targets[o])
        new.append(Layer(net.unique_name(f"{layer.name}/{bl.name}"), bl.op, [names[i] if i else "" for i in bl.inputs],
                         outs, dict(bl.attrs), list(bl.origin or layer.origin)))
    for body_out, out in copies:
        new.append(Layer(net.unique_name(f"{layer.name}/{out}/identity"), "Identity", [names[body_out]], [out],
                         {}, list(layer.origin)))
    return new


def optimize_bodies(net: Network, shape_points: list[dict], run: Callable[[Network, list[dict]], dict],
                    max_fold_elements: int = 1 << 24) -> dict[str, int]:
    """Run `run(body, points)` on every control-flow body of `net`; returns {"bodies": n, "body-changes": Σ,
    "body-layers-before": …, "body-layers-after": …}."""
    layers = [x for x in net.layers if x.op in _BODY_OPS]
    report = {"bodies": 0, "body-changes": 0, "body-layers-before": 0, "body-layers-after": 0}
    if not layers:
        return report
    envs = []
    try:
        envs = [propagate(net, p, max_fold_elements) for p in shape_points]
    except Exception:  # noqa: BLE001 - shapes are optional here: the bodies are then optimised without them
        envs = []
    for layer in layers:
        report["captured-constants"] = report.get("captured-constants", 0) + _capture_constants(net, layer)
        for key, body_points, state in _bodies(layer, envs):
            body = layer.attrs[key]
            before = len(body.layers)
            if state is not None and body_points:
                # assume the carried state keeps its initial shape, optimise a copy under that assumption, keep
                # it only if the optimised body indeed returns the state in that shape (then, by induction on
                # the trips, the assumption holds on every trip and the copy is equivalent)
                trial = copy.deepcopy(body)
                changes = run(trial, body_points)
                if _keeps_state_shapes(trial, body_points, *state, max_fold_elements):
                    layer.attrs[key] = body = trial
                else:
                    changes = run(body, [])
            else:
                changes = run(body, body_points)
            report["bodies"] += 1
            report["body-changes"] += sum(v for k, v in changes.items() if not k.startswith("bod"))
            report["body-layers-before"] += before
            report["body-layers-after"] += len(body.layers)
    return report


def _capture_constants(net: Network, layer: Layer) -> int:
    """Captured tensors that are constants of `net` become constants of the body (same tensor, no copy), so
    folding and the rules that want constant weights/biases see them; the captured input goes from the
    layer and its bodies. Returns how many."""
    a = layer.attrs
    if layer.op == "If":
        first, bodies, shift = 1, [a["then_branch"], a["else_branch"]], 1
    else:
        first, bodies, shift = len(layer.inputs) - int(a.get("num_captured", 0)), [a["body"]], 0
    moved = 0
    for k in range(len(layer.inputs) - 1, first - 1, -1):
        value = net.constants.get(layer.inputs[k]) if layer.inputs[k] else None
        if value is None or any(len(b.inputs) != len(layer.inputs) - shift for b in bodies):
            continue
        for b in bodies:
            name = b.inputs.pop(k - shift)
            b.constants[name] = value
            b.tensors[name] = TensorInfo(name, value.dtype, tuple(value.shape))
        del layer.inputs[k]
        if layer.op != "If":
            a["num_captured"] = int(a["num_captured"]) - 1
        moved += 1
    return moved


def _shape(env: dict, name: str):
    """(shape, dtype) of an outer tensor at one shape point, None when unknown."""
    t = env.get(name) if name else None
    return None if t is None or placeholder_info(t) else (tuple(t.shape), t.dtype)


def _bodies(layer: Layer, envs: list[dict]):
    """(attribute name, shape points, None or (state inputs, state outputs)) for each body of `layer`; [] points
    where a shape is unknown. Loop/Scan points assume the state keeps its initial shape (checked by the caller)."""
    a = layer.attrs
    if layer.op == "If":
        for key in ("then_branch", "else_branch"):
            yield key, _points(a[key], [[_shape(env, i) for i in layer.inputs[1:]] for env in envs]), None
        return
    body, n_cap = a["body"], int(a.get("num_captured", 0))
    if layer.op == "Loop":
        # body(i, cond, *v, *captured) → (cond', *v', *scan_elements)
        n_state = len(layer.inputs) - 2 - n_cap
        rows = [[((), torch.int64), ((), torch.bool)] + [_shape(env, i) for i in layer.inputs[2:]] for env in envs]
        state_in, state_out = list(range(2, 2 + n_state)), list(range(1, 1 + n_state))
    else:
        # body(*s, *x_slices, *captured) → (*s', *y_slices); x sliced along scan_input_axes
        n_scan = int(a["num_scan_inputs"])
        n_state = len(layer.inputs) - n_scan - n_cap
        axes = a.get("scan_input_axes") or [0] * n_scan
        rows = []
        for env in envs:
            row = [_shape(env, i) for i in layer.inputs]
            for k in range(n_scan):
                s = row[n_state + k]
                if s is not None:
                    ax = axes[k] % len(s[0])
                    row[n_state + k] = (s[0][:ax] + s[0][ax + 1:], s[1])
            rows.append(row)
        state_in = state_out = list(range(n_state))
    yield "body", _points(body, rows), (state_in, state_out)


def _points(body: Network, rows: list[list]) -> list[dict]:
    """Shape points of `body` from (shape, dtype) per input; an input the body declares without a dtype gets the
    outer tensor's (propagate would otherwise assume float32); a declared dtype that differs: no points."""
    if not rows or len(rows[0]) != len(body.inputs) or any(s is None for row in rows for s in row):
        return []
    for name, (_, dtype) in zip(body.inputs, rows[0]):
        info = body.tensors.get(name)
        if info is not None and info.dtype is not None and info.dtype != dtype:
            return []
    for name, (shape, dtype) in zip(body.inputs, rows[0]):
        info = body.tensors.get(name)
        if info is None:
            body.tensors[name] = TensorInfo(name, dtype, None)
        elif info.dtype is None:
            info.dtype = dtype
    return [{n: s for n, (s, _) in zip(body.inputs, row)} for row in rows]


def _keeps_state_shapes(body: Network, points, state_in, state_out, max_fold) -> bool:
    """True when, at every point, each loop-carried value leaves the body with the shape it entered with:
    then the first trip's shapes hold on every trip (by induction), and folding Shape(v) is sound."""
    try:
        for p in points:
            env = propagate(body, p, max_fold)
            for i, o in zip(state_in, state_out):
                got = env.get(body.outputs[o])
                if got is None or placeholder_info(got) or tuple(got.shape) != tuple(p[body.inputs[i]]):
                    return False
    except Exception:  # noqa: BLE001 - a body whose shapes cannot be inferred is optimised without them
        return False
    return True

