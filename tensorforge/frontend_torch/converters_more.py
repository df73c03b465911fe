"""More of the aten → IR table: multi-output ops (split, chunk, unbind) with getitem, reductions, clamps,
powers, casts, expand, and the size arithmetic of dynamic graphs. Registered into converters.TABLE on import
(frontend_torch/__init__.py)."""

import operator

import torch

from ..ir import dtype_name
from .converters import Unsupported, _arg, converts, unsupported_reason

aten = torch.ops.aten


def _i64(ctx, values, what):
    return ctx.const(torch.tensor(list(values), dtype=torch.int64), what)


def _slices(ctx, node, dim, sizes, squeeze=False):
    """The pieces along `dim`: one Split layer (views, as the ONNX exporter writes split/chunk, so both paths
    build the same layers), or for unbind one Slice per piece with a Reshape that drops the dim; returns the
    list of names."""
    x, shape, out, start = ctx.t(node.args[0]), ctx.dims(node.args[0]), [], 0
    dim %= len(shape)
    if not squeeze and len(sizes) > 1:
        return ctx.add_outputs("Split", [x, _i64(ctx, sizes, "split")], None, len(sizes), axis=dim)
    for size in sizes:
        y = ctx.add("Slice", [x, _i64(ctx, [start], "start"), _i64(ctx, [start + size], "end"),
                              _i64(ctx, [dim], "axis")], None)
        if squeeze:
            y = ctx.add("Reshape", [y, ctx.target_shape(node.args[0], shape[:dim] + shape[dim + 1:])], None)
        out.append(y)
        start += size
    return out


@converts(aten.split.Tensor, aten.chunk.default)
def split(ctx, node):
    dim = int(_arg(node, 2, "dim", 0))
    n = ctx.static_dim(node.args[0], dim, str(node.target))
    step = int(node.args[1]) if node.target == aten.split.Tensor else -(-n // int(node.args[1]))
    return _slices(ctx, node, dim, [min(step, n - s) for s in range(0, n, step)])


@converts(aten.split_with_sizes.default)
def split_with_sizes(ctx, node):
    return _slices(ctx, node, int(_arg(node, 2, "dim", 0)), [int(s) for s in node.args[1]])


@converts(aten.unbind.int)
def unbind(ctx, node):
    dim = int(_arg(node, 1, "dim", 0))
    return _slices(ctx, node, dim, [1] * ctx.static_dim(node.args[0], dim, "unbind"), squeeze=True)


def _getitem_check(node):
    src = node.args[0]
    if not isinstance(src, torch.fx.Node) or src.op != "call_function" or unsupported_reason(src) is not None:
        return "getitem of a value that does not convert"
    return None


@converts(operator.getitem, check=_getitem_check)
def getitem(ctx, node):
    values = ctx.names[node.args[0].name]
    if not isinstance(values, list):
        raise Unsupported("getitem of a single tensor")
    return values[int(node.args[1])]


@converts(aten.select.int)
def select(ctx, node):
    dim = int(node.args[1]) % ctx.rank(node.args[0])
    index = ctx.const(torch.tensor(int(node.args[2]), dtype=torch.int64), "index")
    return ctx.add("Gather", [ctx.t(node.args[0]), index], node, axis=dim)


def _reduce(op):
    def fn(ctx, node):
        rank = ctx.rank(node.args[0])
        dims = _arg(node, 1, "dim")
        dims = list(range(rank)) if not dims else [int(d) % rank for d in dims]
        keep = int(bool(_arg(node, 2, "keepdim", False)))
        if op == "ReduceMean" and rank == 4 and sorted(dims) == [2, 3] and keep:
            return ctx.add("GlobalAveragePool", [ctx.t(node.args[0])], node)
        return ctx.add(op, [ctx.t(node.args[0]), _i64(ctx, dims, "axes")], node, keepdims=keep)
    return fn


_no_dtype = lambda n: "reduction with a dtype argument" if n.kwargs.get("dtype") is not None else None  # noqa: E731
converts(aten.mean.dim, check=_no_dtype)(_reduce("ReduceMean"))
converts(aten.sum.dim_IntList, check=_no_dtype)(_reduce("ReduceSum"))
converts(aten.amax.default)(_reduce("ReduceMax"))


@converts(aten.clamp.default, aten.hardtanh.default)
def clamp(ctx, node):
    lo_d, hi_d = (None, None) if node.target == aten.clamp.default else (-1.0, 1.0)
    lo, hi = _arg(node, 1, "min", lo_d), _arg(node, 2, "max", hi_d)
    bound = lambda v: "" if v is None else ctx.t(v, like=node)  # noqa: E731
    ins = [ctx.t(node.args[0]), bound(lo), bound(hi)]
    while ins and ins[-1] == "":
        ins.pop()
    return ctx.add("Clip", ins, node)


@converts(aten.leaky_relu.default)
def leaky_relu(ctx, node):
    return ctx.add("LeakyRelu", [ctx.t(node.args[0])], node, alpha=float(_arg(node, 1, "negative_slope", 0.01)))


@converts(aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor)
def pow_(ctx, node):
    return ctx.add("Pow", [ctx.t(node.args[0]), ctx.t(node.args[1], like=node)], node)


@converts(aten.rsqrt.default)
def rsqrt(ctx, node):
    return ctx.add("Reciprocal", [ctx.add("Sqrt", [ctx.t(node.args[0])], None)], node)


def _cast_check(node):
    extra = set(node.kwargs) - {"dtype", "layout", "device", "pin_memory", "memory_format", "copy", "non_blocking"}
    device = node.args[1] if node.target == aten.to.device else node.kwargs.get("device")
    if extra or device is not None and not _same_device(torch.device(device), node.args[0].meta["val"].device):
        return "a copy to another device"
    return None


def _same_device(a: torch.device, b: torch.device) -> bool:
    """`cuda` and `cuda:0` are one device when the index is left open."""
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


@converts(aten._to_copy.default, aten.to.dtype, aten.to.dtype_layout, aten.to.device, check=_cast_check)
def cast(ctx, node):
    return ctx.add("Cast", [ctx.t(node.args[0])], node, to=dtype_name(ctx.dtype(node)))


@converts(aten.expand.default)
def expand(ctx, node):
    return ctx.add("Expand", [ctx.t(node.args[0]), ctx.target_shape(node.args[0], ctx.dims(node), expand=True)], node)


@converts(aten._assert_tensor_metadata.default)
def assert_metadata(ctx, node):
    """export's check that a tensor has its traced dtype: the layers were built from those traced dtypes."""
    return None


_SIZE_READERS = {aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.expand.default,
                 aten._assert_scalar.default}
_SIZE_MATH = {aten.sym_size.int, operator.mul, operator.add, operator.sub, operator.floordiv,
              operator.ge, operator.gt, operator.le, operator.lt, operator.eq}


def _size_check(node):
    """A dynamic size (x.size(d) and +, -, ·, //, comparisons on sizes) is taken when every use ends as a
    reshape/view/expand size or a run-time assertion on sizes: those converters read the traced output shape
    (ctx.target_shape) and ignore the size arguments; the engine's profile bounds the sizes instead."""
    if not isinstance(node.meta.get("val"), (torch.SymInt, torch.SymBool)):
        return f"{node.target} on values that are not tensor sizes"
    for user in node.users:
        if user.target in _SIZE_READERS:
            continue
        if user.target in _SIZE_MATH and _size_check(user) is None:
            continue
        return f"a dynamic size used by {user.target} (only reshape/view/expand sizes are taken)"
    return None


@converts(*_SIZE_MATH, check=_size_check)
def size_value(ctx, node):
    """Nothing to build: the readers take their shapes from the traced output (see _size_check)."""
    return ""


@converts(aten._assert_scalar.default)
def assert_scalar(ctx, node):
    """export's run-time check on sizes (e.g. that a dynamic dim is in its range): the profile checks that."""
    return None


# ---- comparisons, boolean logic, selection --------------------------------------------------------------------
def _traced(arg) -> torch.Tensor | None:
    """The traced value (meta tensor) of a node argument; None for a Python scalar or an untraced value."""
    val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def _compare(op, negate=False):
    """A scalar operand becomes a constant of the tensor's dtype (ctx.t like the tensor)."""
    def fn(ctx, node):
        a, b = node.args[0], node.args[1]
        y = ctx.add(op, [ctx.t(a), ctx.t(b, like=a)], None if negate else node)
        return ctx.add("Not", [y], node) if negate else y
    return fn


def _compare_check(node):
    """Operands of one dtype (ONNX has no type promotion), and no fractional scalar against an integer tensor
    (torch compares in float there; the scalar as a constant of the tensor's dtype would be truncated)."""
    dts = {v.dtype for v in map(_traced, node.args[:2]) if v is not None}
    if len(dts) > 1:
        return f"{node.target} on operands of different dtypes {sorted(map(str, dts))}"
    val, other = _traced(node.args[0]), node.args[1]
    if isinstance(other, float) and not other.is_integer() and val is not None and not val.dtype.is_floating_point:
        return f"{node.target} of a {val.dtype} tensor with the fraction {other}"
    return None


for _name, _op, _neg in [("gt", "Greater", False), ("lt", "Less", False), ("ge", "GreaterOrEqual", False),
                         ("le", "LessOrEqual", False), ("eq", "Equal", False), ("ne", "Equal", True)]:
    converts(getattr(aten, _name).Tensor, getattr(aten, _name).Scalar, check=_compare_check)(_compare(_op, _neg))


def _bool_operands(node):
    if any(v is not None and v.dtype != torch.bool for v in map(_traced, node.args[:2])):
        return "bitwise logic on integers (only boolean and/or/not convert)"
    return None


converts(aten.logical_and.default, aten.bitwise_and.Tensor, aten.__and__.Tensor, check=_bool_operands)(
    lambda ctx, node: ctx.add("And", [ctx.t(node.args[0]), ctx.t(node.args[1])], node))
converts(aten.logical_or.default, aten.bitwise_or.Tensor, aten.__or__.Tensor, check=_bool_operands)(
    lambda ctx, node: ctx.add("Or", [ctx.t(node.args[0]), ctx.t(node.args[1])], node))
converts(aten.logical_not.default, aten.bitwise_not.default, check=_bool_operands)(
    lambda ctx, node: ctx.add("Not", [ctx.t(node.args[0])], node))


def _where_check(node):
    """Tensor branches already of the result's dtype (torch promotes where(c, int_tensor, 0.5) to float)."""
    out = _traced(node)
    for val in map(_traced, node.args[1:3]):
        if val is not None and out is not None and val.dtype != out.dtype:
            return f"{node.target} promoting a {val.dtype} branch to {out.dtype}"
    return None


@converts(aten.where.self, aten.where.ScalarOther, aten.where.ScalarSelf, aten.where.Scalar, check=_where_check)
def where(ctx, node):
    """where(cond, a, b): ONNX Where; a scalar branch takes the node's dtype."""
    cond, a, b = node.args[:3]
    return ctx.add("Where", [ctx.t(cond), ctx.t(a, like=node), ctx.t(b, like=node)], node)


@converts(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(ctx, node):
    """masked_fill(x, mask, v) = Where(mask, v, x), v in x's dtype."""
    x, mask, value = node.args[:3]
    v = ctx.t(value, like=x) if not isinstance(value, torch.fx.Node) else \
        ctx.add("Cast", [ctx.t(value)], None, to=dtype_name(ctx.dtype(x)))
    return ctx.add("Where", [ctx.t(mask), v, ctx.t(x)], node)


@converts(aten.stack.default)
def stack(ctx, node):
    """stack(xs, dim) = Concat of each x unsqueezed at dim."""
    rank = ctx.rank(node)
    dim = int(_arg(node, 1, "dim", 0)) % rank
    parts = [ctx.add("Unsqueeze", [ctx.t(x), _i64(ctx, [dim], "axes")], None) for x in node.args[0]]
    return ctx.add("Concat", parts, node, axis=dim)
