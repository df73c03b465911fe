"""The aten → IR table: one converter per supported aten overload, registered with `@converts(...)`.

A converter gets the `_Ctx` (fx_to_ir.py) and the FX node, and returns the IR tensor name of the node's value.
It raises `Unsupported(reason)` for a call it cannot take (a training-mode batch_norm, a causal attention
mask …); `supports(node)` asks the same question without building anything, so the partitioner and the
converter can never disagree. Op names and attributes are the IR's (ONNX names: Conv, Gemm, MatMul, …).
"""

import operator

import torch

from .functional import writes_an_argument

aten = torch.ops.aten
_INT64_MAX = 2**63 - 1
TABLE: dict = {}          # aten OpOverload → converter(ctx, node) -> str
CHECKS: dict = {}         # aten OpOverload → check(node) -> reason | None


class Unsupported(Exception):
    """A node the converter cannot take; the message says why."""


def converts(*targets, check=None):
    def wrap(fn):
        for t in targets:
            TABLE[t] = fn
            if check is not None:
                CHECKS[t] = check
        return fn
    return wrap


def unsupported_reason(node) -> str | None:
    """None when `node` (a call_function) converts; otherwise the reason it does not."""
    if node.target not in TABLE:
        if writes_an_argument(node.target):
            return (f"in-place {node.target} on a graph input or buffer (the caller sees the write; functional.py "
                    "rewrites in-place ops only on intermediates)")
        return f"no converter for {node.target}"
    check = CHECKS.get(node.target)
    return check(node) if check is not None else None


def _arg(node, i, name, default=None):
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def _pair(v, n=2):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return v * n if len(v) == 1 else v


# ---- convolution, matrix products -------------------------------------------------------------------------------
@converts(aten.conv2d.default)
def conv2d(ctx, node):
    x, w, b = ctx.t(node.args[0]), ctx.t(node.args[1]), _arg(node, 2, "bias")
    stride, pad = _pair(_arg(node, 3, "stride", [1, 1])), _pair(_arg(node, 4, "padding", [0, 0]))
    dil, groups = _pair(_arg(node, 5, "dilation", [1, 1])), int(_arg(node, 6, "groups", 1))
    ins = [x, w] + ([ctx.t(b)] if b is not None else [])
    k = list(ctx.shape(node.args[1])[2:])
    return ctx.add("Conv", ins, node, strides=stride, pads=pad + pad, dilations=dil, group=groups, kernel_shape=k)


@converts(aten.linear.default)
def linear(ctx, node):
    """y = x · Wᵀ + b: Gemm(transB=1) for 2-D x, else MatMul with the transposed weight (a view of it) + Add."""
    x, w, b = node.args[0], node.args[1], _arg(node, 2, "bias")
    if ctx.rank(x) == 2:
        ins = [ctx.t(x), ctx.t(w)] + ([ctx.t(b)] if b is not None else [])
        return ctx.add("Gemm", ins, node, transB=1)
    wt = ctx.transposed_const(w) if ctx.is_const(w) else ctx.add("Transpose", [ctx.t(w)], None, perm=[1, 0])
    y = ctx.add("MatMul", [ctx.t(x), wt], node if b is None else None)
    return y if b is None else ctx.add("Add", [y, ctx.t(b)], node)


@converts(aten.addmm.default)
def addmm(ctx, node):
    beta, alpha = float(node.kwargs.get("beta", 1)), float(node.kwargs.get("alpha", 1))
    return ctx.add("Gemm", [ctx.t(node.args[1]), ctx.t(node.args[2]), ctx.t(node.args[0])], node, alpha=alpha, beta=beta)


@converts(aten.mm.default, aten.bmm.default, aten.matmul.default)
def matmul(ctx, node):
    return ctx.add("MatMul", [ctx.t(node.args[0]), ctx.t(node.args[1])], node)


# ---- pointwise ---------------------------------------------------------------------------------------------------
def _unary(op):
    return lambda ctx, node: ctx.add(op, [ctx.t(node.args[0])], node)


for _t, _op in [(aten.relu.default, "Relu"), (aten.sigmoid.default, "Sigmoid"), (aten.tanh.default, "Tanh"),
                (aten.neg.default, "Neg"), (aten.exp.default, "Exp"), (aten.sqrt.default, "Sqrt"),
                (aten.erf.default, "Erf"), (aten.abs.default, "Abs"), (aten.round.default, "Round"),
                (aten.floor.default, "Floor"), (aten.ceil.default, "Ceil"), (aten.log.default, "Log"),
                (aten.reciprocal.default, "Reciprocal")]:
    converts(_t)(_unary(_op))


@converts(aten.gelu.default, check=lambda n: None if n.kwargs.get("approximate", "none") in ("none", "tanh")
          else "unknown gelu approximation")
def gelu(ctx, node):
    return ctx.add("Gelu", [ctx.t(node.args[0])], node, approximate=node.kwargs.get("approximate", "none"))


@converts(aten.hardswish.default)
def hardswish(ctx, node):
    """x · relu6(x + 3) / 6: ONNX HardSwish."""
    return ctx.add("HardSwish", [ctx.t(node.args[0])], node)


@converts(aten.hardsigmoid.default)
def hardsigmoid(ctx, node):
    """relu6(x + 3) / 6 = max(0, min(1, x/6 + 1/2)): ONNX HardSigmoid with alpha 1/6, beta 1/2 (ONNX's defaults
    are 0.2 and 0.5: both written out)."""
    return ctx.add("HardSigmoid", [ctx.t(node.args[0])], node, alpha=1.0 / 6.0, beta=0.5)


@converts(aten.silu.default)
def silu(ctx, node):
    x = ctx.t(node.args[0])
    return ctx.add("Mul", [x, ctx.add("Sigmoid", [x], None)], node)


def _alpha_ok(node):
    return None if node.kwargs.get("alpha", 1) == 1 else "add/sub with alpha != 1"


def _binary(op, swap=False):
    def fn(ctx, node):
        a, b = ctx.t(node.args[0], like=node), ctx.t(node.args[1], like=node)
        return ctx.add(op, [b, a] if swap else [a, b], node)
    return fn


for _op, _name in [("Add", "add"), ("Sub", "sub"), ("Mul", "mul"), ("Div", "div")]:
    for _ov in ("Tensor", "Scalar"):
        _target = getattr(getattr(aten, _name), _ov)
        converts(_target, check=_alpha_ok if _name in ("add", "sub") else None)(_binary(_op))
converts(aten.rsub.Scalar, check=_alpha_ok)(_binary("Sub", swap=True))


# ---- normalisation, softmax ------------------------------------------------------------------------------------------
@converts(aten.layer_norm.default)
def layer_norm(ctx, node):
    x, ns = node.args[0], list(node.args[1])
    w, b, eps = _arg(node, 2, "weight"), _arg(node, 3, "bias"), float(_arg(node, 4, "eps", 1e-5))
    dtype = ctx.dtype(x)
    scale = ctx.t(w) if w is not None else ctx.const(torch.ones(ns, dtype=dtype), "ln_scale")
    ins = [ctx.t(x), scale] + ([ctx.t(b)] if b is not None else [])
    return ctx.add("LayerNormalization", ins, node, axis=-len(ns), epsilon=eps)


@converts(aten.batch_norm.default, check=lambda n: "batch_norm in training mode (call model.eval())"
          if _arg(n, 5, "training") or _arg(n, 3, "running_mean") is None else None)
def batch_norm(ctx, node):
    return _batch_norm_layer(ctx, node, float(_arg(node, 7, "eps", 1e-5)), node)


def _batch_norm_layer(ctx, node, eps: float, out_node):
    """BatchNormalization from args (x, weight, bias, running mean, running var, …); absent weight/bias are 1/0."""
    x, w, b, mean, var = (node.args[i] for i in range(5))
    c = ctx.static_dim(x, 1, "batch_norm")
    dtype = ctx.dtype(x)
    scale = ctx.t(w) if w is not None else ctx.const(torch.ones(c, dtype=dtype), "bn_scale")
    bias = ctx.t(b) if b is not None else ctx.const(torch.zeros(c, dtype=dtype), "bn_bias")
    return ctx.add("BatchNormalization", [ctx.t(x), scale, bias, ctx.t(mean), ctx.t(var)], out_node, epsilon=eps)


def _no_training_stats(node):
    """The functional eval-mode batch norm returns (y, saved mean, saved invstd); only y is defined here."""
    if any(u.target is not operator.getitem or u.args[1] != 0 for u in node.users):
        return "a use of batch norm's saved statistics (training outputs)"
    return None


@converts(aten._native_batch_norm_legit_no_training.default, check=_no_training_stats)
def batch_norm_functional(ctx, node):
    """What functionalisation (functional.py) makes of batch_norm in eval mode: args (x, w, b, running mean,
    running var, momentum, eps); the value is the one-item list that getitem 0 reads."""
    return [_batch_norm_layer(ctx, node, float(_arg(node, 6, "eps", 1e-5)), None)]


@converts(aten.softmax.int, aten._softmax.default,
          check=lambda n: "softmax with a dtype argument" if n.target == aten.softmax.int and _arg(n, 2, "dtype")
          is not None else None)
def softmax(ctx, node):
    return ctx.add("Softmax", [ctx.t(node.args[0])], node, axis=int(node.args[1]))


def _sdpa_check(node):
    if float(_arg(node, 4, "dropout_p", 0.0)) != 0.0:
        return "scaled_dot_product_attention with dropout"
    if node.kwargs.get("enable_gqa", False):
        return "grouped-query scaled_dot_product_attention"
    mask = _arg(node, 3, "attn_mask")
    if mask is not None and _arg(node, 5, "is_causal", False):
        return "scaled_dot_product_attention with both attn_mask and is_causal (torch refuses it too)"
    if _arg(node, 5, "is_causal", False):
        q, k = (node.args[i].meta.get("val") for i in (0, 1))
        if q is None or k is None or not all(isinstance(d, int) for d in (q.shape[-2], k.shape[-2])):
            return "causal scaled_dot_product_attention with dynamic sequence lengths"
    return None


def _additive_mask(ctx, node, mask, dtype):
    """The mask as a float addend of the scores: a constant bool mask (kept where True) becomes 0 / −inf once, at
    conversion; a float mask is added as it is; is_causal is the constant lower-triangular mask (torch's: row i
    sees keys 0..i, top-left aligned). None for a bool mask known only at run time (the caller writes a Where)."""
    if _arg(node, 5, "is_causal", False):
        lq, lk = ctx.static_dim(node.args[0], -2, "sdpa"), ctx.static_dim(node.args[1], -2, "sdpa")
        keep = torch.ones(lq, lk, dtype=torch.bool).tril()
        return ctx.const(torch.zeros((), dtype=dtype).masked_fill(~keep, float("-inf")), "causal_mask")
    if mask is None:
        return None
    if ctx.dtype(mask) != torch.bool:
        return ctx.t(mask)
    if ctx.is_const(mask):
        keep = ctx.constants[mask.name]
        return ctx.const(torch.zeros(keep.shape, dtype=dtype, device=keep.device).masked_fill(~keep, float("-inf")),
                         "attn_mask")
    return None


@converts(aten.scaled_dot_product_attention.default, check=_sdpa_check)
def sdpa(ctx, node):
    """softmax(q·kᵀ·scale + mask)·v, scale = 1/√d unless given; the mask as _additive_mask says, or, for a bool
    mask known only at run time, Where(mask, scores, −inf). Written as the ONNX exporter writes attention, so the
    attention rule (passes/rules/attention.py) fuses it."""
    q, k, v = node.args[:3]
    rank, d = ctx.rank(q), ctx.static_dim(q, -1, "scaled_dot_product_attention")
    scale = node.kwargs.get("scale") or 1.0 / float(d) ** 0.5
    dtype = ctx.dtype(q)
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    kt = ctx.add("Transpose", [ctx.t(k)], None, perm=perm)
    s = ctx.add("MatMul", [ctx.t(q), kt], None)
    s = ctx.add("Mul", [s, ctx.const(torch.tensor(scale, dtype=dtype), "sdpa_scale")], None)
    mask = _arg(node, 3, "attn_mask")
    addend = _additive_mask(ctx, node, mask, dtype)
    if addend is not None:
        s = ctx.add("Add", [s, addend], None)
    elif mask is not None:
        s = ctx.add("Where", [ctx.t(mask), s, ctx.const(torch.tensor(float("-inf"), dtype=dtype), "fill")], None)
    p = ctx.add("Softmax", [s], None, axis=-1)
    return ctx.add("MatMul", [p, ctx.t(v)], node)


# ---- shapes ---------------------------------------------------------------------------------------------------------
@converts(aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.flatten.using_ints,
          aten.unflatten.int, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.default)
def reshape(ctx, node):
    """Every reshape-like op becomes Reshape to the node's traced output shape (dynamic dims: ctx.target_shape);
    flatten(x, 1) is ONNX's Flatten(axis=1), the layer the ONNX exporter writes for it."""
    if node.target == aten.flatten.using_ints and ctx.rank(node.args[0]) > 1 and int(_arg(node, 1, "start_dim", 0)) \
            == 1 and int(_arg(node, 2, "end_dim", -1)) % ctx.rank(node.args[0]) == ctx.rank(node.args[0]) - 1:
        return ctx.add("Flatten", [ctx.t(node.args[0])], node, axis=1)
    if node.target in (aten.unsqueeze.default, aten.squeeze.dim):       # ONNX's own ops: no shape to compute
        rank = ctx.rank(node) if node.target == aten.unsqueeze.default else ctx.rank(node.args[0])
        axis = torch.tensor([int(node.args[1]) % rank], dtype=torch.int64)
        size = ctx.dims(node.args[0])[int(axis)] if node.target == aten.squeeze.dim else 1
        if not (isinstance(size, int) and size == 1):               # torch: squeezing a non-1 dim is a no-op
            return ctx.add("Identity", [ctx.t(node.args[0])], node)  # (a dynamic dim is ≥ 2: dynamo specialises 1)
        op = "Unsqueeze" if node.target == aten.unsqueeze.default else "Squeeze"
        return ctx.add(op, [ctx.t(node.args[0]), ctx.const(axis, "axes")], node)
    return ctx.add("Reshape", [ctx.t(node.args[0]), ctx.target_shape(node.args[0], ctx.dims(node))], node)


@converts(aten.permute.default)
def permute(ctx, node):
    rank = ctx.rank(node.args[0])
    return ctx.add("Transpose", [ctx.t(node.args[0])], node, perm=[int(d) % rank for d in node.args[1]])


@converts(aten.transpose.int, aten.t.default)
def transpose(ctx, node):
    rank = ctx.rank(node.args[0])
    perm = list(range(rank))
    a, b = (int(node.args[1]) % rank, int(node.args[2]) % rank) if len(node.args) > 2 else (0, rank - 1)
    perm[a], perm[b] = perm[b], perm[a]
    return ctx.add("Transpose", [ctx.t(node.args[0])], node, perm=perm)


@converts(aten.cat.default)
def cat(ctx, node):
    axis = int(_arg(node, 1, "dim", 0)) % ctx.rank(node)
    return ctx.add("Concat", [ctx.t(a) for a in node.args[0]], node, axis=axis)


@converts(aten.clone.default, aten.contiguous.default, aten.alias.default,
          aten.dropout.default, check=lambda n: "dropout in training mode" if n.target == aten.dropout.default
          and _arg(n, 2, "train") else None)
def identity(ctx, node):
    return ctx.add("Identity", [ctx.t(node.args[0])], node)


@converts(aten.embedding.default)
def embedding(ctx, node):
    return ctx.add("Gather", [ctx.t(node.args[0]), ctx.t(node.args[1])], node, axis=0)


# ---- pooling --------------------------------------------------------------------------------------------------------
@converts(aten.max_pool2d.default)
def max_pool2d(ctx, node):
    k = _pair(node.args[1])
    s = _pair(_arg(node, 2, "stride", []) or k)
    p, d = _pair(_arg(node, 3, "padding", 0)), _pair(_arg(node, 4, "dilation", 1))
    return ctx.add("MaxPool", [ctx.t(node.args[0])], node, kernel_shape=k, strides=s, pads=p + p, dilations=d,
                   ceil_mode=int(bool(_arg(node, 5, "ceil_mode", False))))


@converts(aten.avg_pool2d.default, check=lambda n: "avg_pool2d with divisor_override"
          if _arg(n, 6, "divisor_override") is not None else None)
def avg_pool2d(ctx, node):
    k = _pair(node.args[1])
    s = _pair(_arg(node, 2, "stride", []) or k)
    p = _pair(_arg(node, 3, "padding", 0))
    return ctx.add("AveragePool", [ctx.t(node.args[0])], node, kernel_shape=k, strides=s, pads=p + p,
                   ceil_mode=int(bool(_arg(node, 4, "ceil_mode", False))),
                   count_include_pad=int(bool(_arg(node, 5, "count_include_pad", True))))


@converts(aten.adaptive_avg_pool2d.default, check=lambda n: None if list(n.args[1]) == [1, 1]
          else "adaptive_avg_pool2d to a size other than 1x1")
def global_avg_pool(ctx, node):
    return ctx.add("GlobalAveragePool", [ctx.t(node.args[0])], node)


@converts(aten.slice.Tensor)
def slice_(ctx, node):
    """x[..., start:end:step, ...] on one dim → Slice with the bounds clamped to the traced size."""
    dim = int(_arg(node, 1, "dim", 0)) % ctx.rank(node.args[0])
    size = ctx.dims(node.args[0])[dim]
    start, end = _arg(node, 2, "start"), _arg(node, 3, "end")
    if not all(v is None or isinstance(v, int) for v in (start, end)):
        raise Unsupported("a slice with dynamic bounds")
    if isinstance(size, int):
        start = 0 if start is None else max(-size, min(int(start), size))
        end = size if end is None else max(-size, min(int(end), size))
    else:                                      # a dynamic dim: ONNX Slice clamps at run time
        start, end = (0 if start is None else int(start)), (_INT64_MAX if end is None else min(int(end), _INT64_MAX))
    i64 = lambda v: ctx.const(torch.tensor([v], dtype=torch.int64), "slice")  # noqa: E731
    ins = [ctx.t(node.args[0]), i64(start), i64(end), i64(dim), i64(int(_arg(node, 4, "step", 1)))]
    return ctx.add("Slice", ins, node)
