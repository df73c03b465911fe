"""Importers for the opset < 7 versions of the arithmetic ops (Add/Sub/Mul/Div-6, Pow-1, Max/Min/Sum-6, PRelu-6).

Before opset 7 the binary ops broadcast only when asked (`broadcast=1`), and then one way: B is matched to A's
shape starting at dimension `axis` (default: B's dims are A's trailing dims). That is numpy broadcasting of B
after appending rank(A) − axis − rank(B) unit dims to it, which is what these importers emit; with broadcast=0
the shapes must be equal (refused when both are known and differ), where numpy broadcasting is the identity. Where the ranks that the rewrite needs are
unknown at import, or B would widen A (legacy broadcasting never changes A's shape), the node is refused with
the reason. Max/Min/Sum-6 take equal shapes only: numpy broadcasting agrees on those.
Entry point: the registry (`@importer`), like every importer module.
"""

import torch

from ...util.errors import ModelError
from ..registry import importer


def _rank(ctx, name: str) -> int | None:
    value = ctx.constant_value(name)
    if value is not None:
        return value.dim()
    info = ctx.info(name)
    return len(info.shape) if info is not None and info.shape is not None else None


def _legacy_b(ctx, node, a: str, b: str) -> str:
    """B, reshaped so that numpy broadcasting against A is the legacy `broadcast=1, axis` matching."""
    if "axis" not in node.explicit_attrs:
        _check_onto_a(ctx, node, a, _static_shape(ctx, b))
        return b                                 # B's dims are A's trailing dims: numpy's rule already
    ra, rb = _rank(ctx, a), _rank(ctx, b)
    if ra is None or rb is None:
        raise ModelError(f"{node.where()}: legacy broadcast=1 with axis={node.attrs['axis']} needs the ranks of "
                         f"both inputs at import, and {'A' if ra is None else 'B'}'s is unknown",
                         "re-export the model at opset 7 or later (numpy-style broadcasting)")
    axis = node.attrs["axis"] + (ra if node.attrs["axis"] < 0 else 0)
    pad = ra - axis - rb
    if axis < 0 or pad < 0:
        raise ModelError(f"{node.where()}: legacy broadcast axis={node.attrs['axis']} does not fit B (rank {rb}) "
                         f"into A (rank {ra})", "fix the axis attribute or re-export at opset 7 or later")
    sb = _static_shape(ctx, b)
    _check_onto_a(ctx, node, a, sb + (1,) * pad if sb is not None else None)
    if pad == 0:
        return b
    axes = ctx.const(list(range(rb, rb + pad)), dtype=torch.int64, name="legacy_axes")
    return ctx.add1("Unsqueeze", [b, axes])


def _static_shape(ctx, name: str):
    value = ctx.constant_value(name)
    if value is not None:
        return tuple(value.shape)
    info = ctx.info(name)
    if info is None or info.shape is None or not all(isinstance(d, int) and d >= 0 for d in info.shape):
        return None
    return tuple(info.shape)


def _check_onto_a(ctx, node, a: str, sb) -> None:
    """Legacy broadcasting maps B (static shape `sb`, after the axis padding) onto A and never changes A's
    shape: refuse a B that numpy broadcasting would reject or let widen A (when both shapes are known)."""
    sa = _static_shape(ctx, a)
    if sa is None or sb is None:
        return
    try:
        out = tuple(torch.broadcast_shapes(sa, sb))
    except RuntimeError:
        out = None
    if out != sa:
        raise ModelError(f"{node.where()}: legacy broadcast of B {list(sb)} onto A {list(sa)} is not defined "
                         "(B must map onto A's shape without changing it)",
                         "fix the model's shapes or re-export it at opset 7 or later")


def _binary(op: str):
    def fn(ctx, node, inputs):
        a, b = inputs[0], inputs[1]
        if node.attrs.get("broadcast", 0):
            b = _legacy_b(ctx, node, a, b)
        else:
            sa, sb = _static_shape(ctx, a), _static_shape(ctx, b)
            if sa is not None and sb is not None and sa != sb:
                raise ModelError(f"{node.where()}: without broadcast=1 the inputs must have one shape, got "
                                 f"{list(sa)} and {list(sb)}", "set broadcast=1 or re-export at opset 7 or later")
        return [ctx.add1(op, [a, b])]
    fn.__name__ = f"import_{op.lower()}_legacy"
    fn.__doc__ = f"{op} with the legacy `broadcast`/`axis` attributes, as numpy broadcasting (module docstring)."
    return fn


for _op, _version in (("Add", 6), ("Sub", 6), ("Mul", 6), ("Div", 6), ("Pow", 1)):
    importer(_op, versions=(_version,))(_binary(_op))


def _variadic(op: str):
    def fn(ctx, node, inputs):
        return [ctx.add1(op, list(inputs))]
    fn.__name__ = f"import_{op.lower()}_6"
    return fn


for _op in ("Max", "Min", "Sum"):
    importer(_op, versions=(6,))(_variadic(_op))


@importer("PRelu", versions=(6,))
def import_prelu_6(ctx, node, inputs):
    """PRelu-6: the slope is one value shared by every element, or a value per element (same shape as X), or —
    PRelu's Caffe2 origin, and what exporters of opset 6 write — a 1-D slope of one value per channel (dim 1).
    The per-channel slope is reshaped to (C, 1, …, 1), so numpy broadcasting applies it along dim 1."""
    x, slope = inputs[0], inputs[1]
    rx = _rank(ctx, x)
    value = ctx.constant_value(slope)
    info = ctx.info(slope)
    shape = tuple(value.shape) if value is not None else (info.shape if info is not None else None)
    xs = ctx.info(x).shape if ctx.info(x) is not None else None
    if shape is None or rx is None:
        raise ModelError(f"{node.where()}: PRelu-6 needs the shapes of X and slope at import to tell a shared, "
                         "per-channel or per-element slope apart", "re-export the model at opset 9 or later")
    size = 1
    for d in shape:
        size = size * d if isinstance(d, int) else -1
    if size == 1 or (xs is not None and tuple(shape) == tuple(xs)):
        return [ctx.add1("PRelu", [x, slope])]
    if len(shape) == 1 and rx >= 2 and xs is not None and shape[0] == xs[1]:
        axes = ctx.const(list(range(1, rx - 1)), dtype=torch.int64, name="channel_axes")
        return [ctx.add1("PRelu", [x, ctx.add1("Unsqueeze", [slope, axes])])] if rx > 2 else \
            [ctx.add1("PRelu", [x, slope])]
    raise ModelError(f"{node.where()}: PRelu-6 slope of shape {list(shape)} for X of shape "
                     f"{list(xs) if xs is not None else '?'} is neither shared, per channel nor per element",
                     "re-export the model at opset 9 or later (numpy-style broadcasting of slope)")
