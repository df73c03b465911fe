"""Gemm between two reshapes → MatMul on the unflattened input (then the epilogue rule fuses what follows).

Exporters: torch.onnx.export (legacy and dynamo) of GPT-2's Conv1D — `addmm(b, x.view(-1, K), W).view(…, N)` —
and of any Linear applied through an explicit flatten. As a Gemm between reshapes the product hides from the
epilogue rule (the bias is inside, the activation and residual come after the second Reshape); as
MatMul + Add on x's own shape the whole block becomes one MatMulEpilogue, and two reshape copies go.
"""

import torch

from ..pattern import AnyOf, Const, Op, Var
from .base import Rule
from .epilogue import per_channel_reason


class GemmThroughReshape(Rule):
    """GPT-2's Conv1D (and any Linear applied through `x.view(-1, K)`), exported as

        x (…, K) ─► Reshape(−1, K) ─► Gemm(W, c) ─► Reshape(…, N) ─► y    ⇒    x ─► MatMul(W) ─► Add(c) ─► y

    The reshapes only fold and unfold the rows, so the product can run on x directly (or on x reshaped to
    y's leading dims, when x is split differently and y's shape is a constant — the head merge before the
    attention output projection); the epilogue rule then takes the bias and any activation or residual.
    """

    name = "Reshape(Gemm(Reshape(x, (−1, K)), W, c), (…, N)) ⇒ x·W + c"
    anchor = "Gemm"
    _rows, _w = Op("Reshape", Var("x"), Var("shape_in"), name="r_in"), Const(name="w", scalar=False)
    pattern = Op("Reshape", AnyOf(Op("Gemm", _rows, _w, Var("c"), name="gemm"), Op("Gemm", _rows, _w, name="gemm")),
                 Var("shape_out"), name="r_out")

    def check(self, m, g):
        gemm, w = m["gemm"], m["w.value"]
        xs, ys = g.values(m["x"]), g.values(m.root.outputs[0])
        if xs is None or ys is None:
            return f"shapes unknown ({g.shape_error})"
        if gemm.attrs.get("transA", 0) or float(gemm.attrs.get("alpha", 1.0)) != 1.0:
            return "Gemm with transA=1 or alpha ≠ 1"
        trans_b = gemm.attrs.get("transB", 0)
        n, k = (w.shape[0], w.shape[1]) if trans_b else (w.shape[1], w.shape[0])
        if any(b.shape[-1] != n or b.dim() < 2 for b in ys):
            return f"the output reshape {tuple(ys[0].shape)} does not keep the {n} columns last"
        if any(a.shape[:-1] != b.shape[:-1] or a.shape[-1] != k for a, b in zip(xs, ys)):
            shape_out = g.constant(m["shape_out"])
            if shape_out is None:     # x must be re-split as (…, K): fine when the output shape is a constant
                return (f"x {tuple(xs[0].shape)} is not (…, {k}) with the output's leading dims and the output "
                        f"shape is computed at run time")
            m.binds["shape_x"] = shape_out.reshape(-1)[:-1].tolist() + [k]
        if "c" in m.binds:
            c = g.constant(m["c"])
            why = "not a constant" if c is None else per_channel_reason(c, "Gemm", 2, n)
            if why:
                return f"Gemm's C: {why}"
        m.binds["n"] = n
        return None

    def rewrite(self, m, g):
        net, gemm = g.net, m["gemm"]
        w_name = m["w"]
        if gemm.attrs.get("transB", 0):
            w_name = net.add_constant(net.unique_name(f"{w_name}/transposed"), m["w.value"].t().contiguous())
        layers = []
        x = m["x"]
        if "shape_x" in m.binds:       # x (…) → (leading dims of y, K): the same rows as the (M, K) matrix
            shape = net.add_constant(net.unique_name(f"{gemm.name}/shape"), torch.tensor(m["shape_x"]))
            x_rows = self.fresh_tensor(g, f"{gemm.name}/rows")
            layers.append(self.new_layer(g, m, "Reshape", [x, shape], [x_rows], {"allowzero": 0}, suffix="/rows"))
            x = x_rows
        product = self.fresh_tensor(g, f"{gemm.name}/product") if "c" in m.binds else m.root.outputs[0]
        layers.append(self.new_layer(g, m, "MatMul", [x, w_name], [product], suffix="/matmul"))
        if "c" in m.binds:
            c = net.constants[m["c"]].reshape(-1).expand(m["n"]) * float(gemm.attrs.get("beta", 1.0))
            c_name = net.add_constant(net.unique_name(f"{gemm.name}/bias"), c.contiguous().clone())
            layers.append(self.new_layer(g, m, "Add", [product, c_name], suffix="/bias"))
        return layers


RULES = [GemmThroughReshape()]
