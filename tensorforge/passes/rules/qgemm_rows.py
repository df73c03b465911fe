"""A quantized GEMM between two reshapes runs on the output's rows: the quantized form of gemm_reshape.py.

    x (…, K) ─► Reshape(−1, K) ─► QuantizedMatMul ─► (M, N) ─► Reshape(d₁…dᵣ, N) ─► y
        ⇒   x ─► Reshape(d₁…dᵣ, K) ─► QuantizedMatMul ─► y (d₁…dᵣ, N)

The product is row-wise (y's row i depends on x's row i only), and both reshapes keep the same M = d₁·…·dᵣ rows in
the same row-major order, so the GEMM may as well see its rows as (d₁…dᵣ). What that buys: x is often a transposed
view. ViT's attention (torch's nn.MultiheadAttention, batch-first) merges its heads as
Transpose(2, 0, 1, 3) → Reshape(L·B, E): under INT8 the attention writes its codes in (B, L, H, d) memory, so
(L, B, H, d) → (L, B, E) is a view but (L·B, E) is not, and the reshape copied every code (12 copies in ViT-B/16,
with the one before each QKV GEMM: 280 µs of 3.26 ms at batch 32 on an H100). On (L, B, E) rows the GEMM kernel
multiplies in memory order (kernels/quant_gemm.py, `rows_in_memory_order`) and returns y as the same permutation
of a dense (B, L, N) result, so the Transpose(1, 0, 2) back to batch-first that follows is a view too.

Runs late (LATE_PASSES, after quantize-before-views): only then does the head-merging Reshape sit directly before
the GEMM (the Q it fed has climbed above it to the attention). Conditions, each a logged rejection: the first
reshape is read only by the GEMM; the GEMM has one output, no residual input, and only the second reshape reads it;
the second reshape's shape is a constant without 0 (a 0 would copy a dimension of the (M, N) matrix) that keeps N
last. x itself may have any shape: every reshape keeps the row-major order of the elements, so x as (M, K) and as
(d₁…dᵣ, K) hold the same rows. Traffic saved: the copy of x (read and write, 1 byte per code) where x was
a permuted view; nothing changes where x was dense.
Entry point: `keep_gemm_rows(net, shape_points=..., rejections=None) -> changes`.
"""

import torch

from ...ir import Layer
from ..pattern import Graph
from .base import record_rejection

NAME = "Reshape(−1, K) → QuantizedMatMul → Reshape(…, N) ⇒ the GEMM on the output's rows"


def _reason(g: Graph, users: dict, r_in: Layer | None, gemm: Layer) -> tuple[str | None, Layer | None, list | None]:
    """(why not, the second reshape, the new shape of x) for one QuantizedMatMul."""
    if r_in is None or r_in.op != "Reshape":
        return "x is not a Reshape's output", None, None
    if len(users.get(gemm.inputs[0], [])) != 1 or g.is_output(gemm.inputs[0]):
        return "the first reshape's output is read by other layers too", None, None
    if len(gemm.outputs) != 1 or (len(gemm.inputs) > 3 and gemm.inputs[3]):
        return "the GEMM has a second output or a residual input", None, None
    y = gemm.outputs[0]
    readers = users.get(y, [])
    if g.is_output(y) or len(readers) != 1 or readers[0].op != "Reshape" or readers[0].inputs[0] != y:
        return "the GEMM's output is not read by one Reshape only", None, None
    r_out = readers[0]
    shape = g.constant(r_out.inputs[1])
    if shape is None:
        return "the output reshape's shape is computed at run time", None, None
    dims = [int(d) for d in shape.reshape(-1).tolist()]
    if 0 in dims:
        return f"the output reshape {dims} has a 0 (a copied dimension of the (M, N) matrix, or no rows)", None, None
    xs, ys, outs = g.values(gemm.inputs[0]), g.values(y), g.values(r_out.outputs[0])
    if xs is None or ys is None or outs is None:
        return f"shapes unknown ({g.shape_error})", None, None
    for x2, y2, out in zip(xs, ys, outs):
        if x2.dim() != 2 or y2.dim() != 2 or out.dim() < 2 or out.shape[-1] != y2.shape[1]:
            return (f"the output reshape {tuple(out.shape)} does not keep the columns of the GEMM's "
                    f"{tuple(y2.shape)} last"), None, None
    if dims[-1] not in (-1, ys[0].shape[1]):
        return f"the output reshape's last entry {dims[-1]} is not N", None, None
    # any reshape keeps the row-major order of the elements, so (M, K) and (d₁…dᵣ, K) hold the same rows
    return None, r_out, dims[:-1] + [int(xs[0].shape[1])]


def keep_gemm_rows(net, shape_points=None, rejections=None, **_) -> int:
    """Every QuantizedMatMul between Reshape(−1, K) and Reshape(…, N) (module doc) takes x reshaped to the output's
    leading dims and writes the final shape itself; the second reshape goes. Returns the number rewritten."""
    g = Graph(net, shape_points)
    users = net.consumers()
    producers = net.producers()
    drop: set[int] = set()
    changed = 0
    for gemm in list(net.layers):
        if gemm.op != "QuantizedMatMul":
            continue
        r_in = producers.get(gemm.inputs[0])
        why, r_out, x_dims = _reason(g, users, r_in, gemm)
        if why:
            if r_in is not None and r_in.op == "Reshape":    # only the shape this rule is about is worth a line
                record_rejection(NAME, gemm.name, why, rejections)
            continue
        shape = net.add_constant(net.unique_name(f"{gemm.name}/rows_shape"), torch.tensor(x_dims, dtype=torch.int64))
        r_in.inputs = [r_in.inputs[0], shape]
        gemm.outputs = [r_out.outputs[0]]
        gemm.origin = gemm.origin + [o for o in r_out.origin if o not in gemm.origin]
        drop.add(id(r_out))
        changed += 1
    net.layers = [la for la in net.layers if id(la) not in drop]
    return changed
