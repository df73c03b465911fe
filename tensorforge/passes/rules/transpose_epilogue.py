"""A per-channel scale and a residual Add behind a Transpose join the GEMM before it: ConvNeXt's block tail.

    G = MatMulEpilogue(h, W, b) (…, C) ─► Transpose(p) ─► Mul(s) ─► Add(r) ─► y
        ⇒   MatMulEpilogue(h, W·s, b·s, residual = Transpose(r, p⁻¹)) ─► Transpose(p) ─► y

torchvision's ConvNeXt block ends `layer_scale · Permute(0, 3, 1, 2)(Linear(…)) + input`: the second Linear writes
channels-last rows, the Permute makes them NCHW, and a PointwiseChain multiplied by the (C, 1, 1) layer scale and
added the block input — one more read and write of the activation per block (18 launches in ConvNeXt-T, 110.7 µs
of its 2116 µs of kernels at batch 32 on the H200). s varies only along the axis the Transpose made of G's last
axis, so it is a per-column scale of G: (h·W + b)·s = h·(W·s) + b·s, folded into the constant weight and bias
(G must have no activation, and no residual of its own). The residual is read through the inverse Transpose — a
view; where the block input lies in channels-last memory, as the conv and pointwise kernels leave it, a dense
(…, C) one the GEMM epilogue reads row by row — and the Transpose moves behind the sum, a view again.
Conditions, each a logged rejection: G's output, the Transpose's and the Mul's each read by the next layer only;
s a constant broadcasting along that one axis; W and b constants that only G reads; r computed, of y's shape.
Traffic saved: the PointwiseChain's read of G's output and r and its write of y; its launch.
Entry point: `fuse_transposed_epilogue(net, shape_points=..., rejections=None) -> changes`.
"""

import torch

from ...ir import Layer, get_spec
from ..pattern import Graph
from .base import record_rejection

NAME = "MatMulEpilogue → Transpose → Mul(per-channel s) → Add(r) ⇒ the GEMM with W·s, b·s and residual Transpose⁻¹(r)"


def _only_reader(users: dict, g: Graph, tensor: str, op: str) -> Layer | None:
    readers = users.get(tensor, [])
    if g.is_output(tensor) or len(readers) != 1 or readers[0].op != op:
        return None
    return readers[0]


def _channel_scale(g: Graph, mul: Layer, t_out: str, axis: int, rank: int) -> tuple[torch.Tensor | None, str]:
    """The Mul's constant operand as a (C,) vector along `axis` of the transposed output, or (None, why)."""
    other = mul.inputs[1] if mul.inputs[0] == t_out else mul.inputs[0]
    s = g.constant(other)
    if s is None:
        return None, "the Mul's other operand is computed"
    if s.dim() > rank:
        return None, f"the scale has rank {s.dim()} > {rank}"
    full = [1] * (rank - s.dim()) + list(s.shape)
    if any(n != 1 for i, n in enumerate(full) if i != axis):
        return None, f"the scale {tuple(s.shape)} varies along an axis other than the channels' ({axis})"
    return s.reshape(-1).to(torch.float32), ""


def _reason(g, users, gemm):
    """(why not, (transpose, mul, add, scale (C,), residual, perm)) for one MatMulEpilogue; (None, None) where the
    GEMM is not followed by Transpose → Mul → Add at all (nothing worth a line)."""
    t = _only_reader(users, g, gemm.outputs[0], "Transpose")
    mul = _only_reader(users, g, t.outputs[0], "Mul") if t is not None else None
    add = _only_reader(users, g, mul.outputs[0], "Add") if mul is not None else None
    if add is None:
        return None, None
    a = gemm.attrs
    if a.get("activation", "none") != "none" or (len(gemm.inputs) > 3 and gemm.inputs[3]):
        return "the GEMM has an activation or a residual of its own", None
    if float(a.get("scale", 1.0)) != 1.0:
        return "the GEMM has a scale", None
    rank = g.rank(t.outputs[0])
    perm = list(t.attrs.get("perm") or range(rank - 1, -1, -1)) if rank else []
    if not rank or len(perm) != rank:
        return f"shapes unknown ({g.shape_error})", None
    scale, why = _channel_scale(g, mul, t.outputs[0], perm.index(rank - 1), rank)
    if scale is None:
        return why, None
    w, b = gemm.inputs[1], gemm.inputs[2] if len(gemm.inputs) > 2 else ""
    if g.constant(w) is None or (b and g.constant(b) is None):
        return "the GEMM's weight or bias is computed", None
    if any(len(users.get(c, [])) != 1 for c in (w, b) if c):
        return "the GEMM's weight or bias is shared with another layer", None
    n = g.constant(w).shape[-2 if a.get("trans_b", 0) else -1]
    if scale.numel() not in (1, n):
        return f"the scale has {scale.numel()} values for {n} channels", None
    r = add.inputs[1] if add.inputs[0] == mul.outputs[0] else add.inputs[0]
    if g.constant(r) is not None or not g.same_shape(r, add.outputs[0]):
        return "the Add's other operand is not a computed tensor of the output's shape", None
    return None, (t, mul, add, scale.expand(n), r, perm)


def fuse_transposed_epilogue(net, shape_points=None, rejections=None, **_) -> int:
    """Every MatMulEpilogue followed by Transpose → Mul(s) → Add(r) as in the module doc takes s into its weight and
    bias and r as its residual; the Mul and the Add go, the Transpose moves behind. Returns the number rewritten."""
    g = Graph(net, shape_points)
    users = net.consumers()
    drop: set[int] = set()
    new_layers: dict[int, list[Layer]] = {}
    changed = 0
    for gemm in list(net.layers):
        if gemm.op != "MatMulEpilogue" or id(gemm) in drop:
            continue
        why, found = _reason(g, users, gemm)
        if why:
            record_rejection(NAME, gemm.name, why, rejections)
        if found is None:
            continue
        t, mul, add, scale, r, perm = found
        trans_b = gemm.attrs.get("trans_b", 0)
        w = net.constants[gemm.inputs[1]]
        w_scaled = w * (scale.reshape(-1, 1) if trans_b else scale).to(w.dtype)
        inputs = [gemm.inputs[0], net.add_constant(net.unique_name(f"{gemm.inputs[1]}/scaled"), w_scaled.contiguous())]
        if len(gemm.inputs) > 2 and gemm.inputs[2]:
            b = net.constants[gemm.inputs[2]]
            inputs.append(net.add_constant(net.unique_name(f"{gemm.inputs[2]}/scaled"),
                                           (b.reshape(-1) * scale.to(b.dtype)).contiguous()))
        else:
            inputs.append("")
        inverse = sorted(range(len(perm)), key=perm.__getitem__)
        r_rows = net.unique_name(f"{r}/rows")
        back = Layer(net.unique_name(f"{gemm.name}/residual_transpose"), "Transpose", [r], [r_rows],
                     get_spec("Transpose").resolve_attrs({"perm": inverse}))
        product = net.unique_name(f"{gemm.outputs[0]}/with_residual")
        fused = Layer(gemm.name, "MatMulEpilogue", inputs + [r_rows], [product],
                      get_spec("MatMulEpilogue").resolve_attrs({**gemm.attrs, "residual_first": 0}))
        moved = Layer(t.name, "Transpose", [product], [add.outputs[0]], dict(t.attrs))
        for layer in (back, fused):
            layer.origin = list(gemm.origin)
            layer.precision, layer.placement = gemm.precision, gemm.placement
        fused.origin = gemm.origin + [o for la in (mul, add) for o in la.origin if o not in gemm.origin]
        moved.origin, moved.precision, moved.placement = list(t.origin), t.precision, t.placement
        new_layers[id(add)] = [back, fused, moved]      # at the Add's place: r and the GEMM's inputs exist there
        drop.update({id(gemm), id(t), id(mul), id(add)})
        changed += 1
    out = []
    for layer in net.layers:
        out.extend(new_layers.get(id(layer), []) if id(layer) in drop else [layer])
    net.layers = out
    return changed
