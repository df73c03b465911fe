"""Scaled dot-product attention written out → one Attention layer (ir/ops/fused.py).

Exporters: torch.onnx.export of BERT/ViT-style self-attention (legacy at every opset and dynamo:
MatMul(q, kᵀ) → Div(√d) → Add(mask) → Softmax → MatMul(·, v)), of F.scaled_dot_product_attention (legacy
opset ≥ 14 and dynamo scale q and kᵀ by √scale each before the MatMul, and guard the probabilities with
Where(IsNaN(P), 0, P): the fused op's nan_to_zero), and GPT-2's causal form
(Where(causal, scores, −big) then Add(attention_mask)). kᵀ is whatever feeds the first MatMul (usually
Transpose(k, perm=[0,2,3,1]) of the head split); the rule hands the fused op k = swap-last-two(kᵀ) as one
Transpose (a view, no copy) composed with kᵀ's own Transpose when there is one.
Fused only when the softmax runs over the last axis, q·kᵀ and P·v dimensions agree and every scale is a
scalar constant. The (Sq × Sk) scores and probabilities then never reach memory.
"""

import torch

from ..pattern import AnyOf, Const, Op, Var
from .base import Rule

_q, _kt = Var("q"), Var("kt")
_qk = AnyOf(Op("MatMul", Op("Mul", _q, Const(name="scale_q")), Op("Mul", _kt, Const(name="scale_k")), name="qk"),
            Op("MatMul", _q, _kt, name="qk"))
_scaled = AnyOf(Op("Div", _qk, Const(name="div")), Op("Mul", _qk, Const(name="mul")), _qk)
_where = Op("Where", Var("cond"), _scaled, Const(name="fill"), name="where")
_masked = AnyOf(Op("Add", _where, Var("mask")), _where, Op("Add", _scaled, Var("mask")), _scaled)
_softmax = Op("Softmax", _masked, name="softmax")
_probs = AnyOf(Op("Where", Op("IsNaN", _softmax), Const(0.0), _softmax, name="nan_guard"), _softmax)
PATTERN = Op("MatMul", _probs, Var("v"), name="pv")


class ScaledDotProductAttention(Rule):
    """
        q ───────────────────────┐
        k ─► Transpose ─► kᵀ ─► MatMul ─► Div(√d) ─► Add(mask) ─► Softmax(−1) ─► MatMul(·, v) ─► y
                                                                       v ───────┘
        ⇒  Attention(q, k, v, mask, scale=1/√d)
    """

    name = "softmax(q·kᵀ·s + m)·v ⇒ Attention(q, k, v, m)"
    anchor = "Softmax"
    pattern = PATTERN

    def check(self, m, g):
        q, kt, v, out = m["q"], m["kt"], m["v"], m.root.outputs[0]
        shapes = [g.shape(t) for t in (q, kt, v, out)]
        if any(s is None for s in shapes):
            return f"shapes unknown ({g.shape_error})"
        sq, skt, sv, so = shapes
        if min(len(sq), len(skt), len(sv)) < 2 or not (len(sq) == len(skt) == len(sv)):
            return f"q {sq}, kᵀ {skt}, v {sv} do not have one common rank ≥ 2"
        if sq[-1] != skt[-2] or skt[-1] != sv[-2]:
            return f"q {sq} · kᵀ {skt} · v {sv} do not chain as (…, Sq, D)(…, D, Sk)(…, Sk, Dv)"
        scores_rank = g.rank(m["softmax"].inputs[0])
        axis = m["softmax"].attrs.get("axis", -1)
        if axis not in (-1, scores_rank - 1):
            return f"the softmax runs over axis {axis}, not the last (key) axis"
        dts = {g.dtype(t) for t in (q, kt, v)}
        if len(dts) != 1 or not next(iter(dts)).is_floating_point:
            return f"q, kᵀ, v dtypes {sorted(map(str, dts))} are not one float type"
        if "mask" in m.binds:
            ms = g.shape(m["mask"])
            if ms is None or len(ms) > len(so):
                return f"the mask {m['mask']!r} has shape {ms}"
            if g.dtype(m["mask"]) is None or not g.dtype(m["mask"]).is_floating_point:
                return "the additive mask is not a float tensor"
        if "where" in m.binds:
            if g.dtype(m["cond"]) != torch.bool:
                return "Where's condition is not boolean"
            fill = float(m["fill.value"].reshape(-1)[0])
            if not fill <= -1e4:
                return f"Where fills {fill:g}, not a large negative value: it is not a mask"
        if not g.same_shape(m["pv"].outputs[0], out):
            return "output shape mismatch"
        scale = 1.0
        for key in ("scale_q", "scale_k", "mul"):
            if key in m.binds:
                scale *= float(m[key + ".value"].reshape(-1)[0])
        if "div" in m.binds:
            d = float(m["div.value"].reshape(-1)[0])
            if d == 0:
                return "division of the scores by zero"
            scale /= d
        m.binds["scale"] = scale
        return None

    def rewrite(self, m, g):
        net = g.net
        layers = []
        rank = g.rank(m["kt"])
        swap = list(range(rank - 2)) + [rank - 1, rank - 2]
        src, perm = m["kt"], swap
        producer = g.producer(m["kt"])
        if producer is not None and producer.op == "Transpose" and producer.attrs.get("perm") is not None:
            inner = list(producer.attrs["perm"])
            src, perm = producer.inputs[0], [inner[p] for p in swap]
        k = self.fresh_tensor(g, f"{m.root.name}/k")
        if perm == list(range(rank)):
            k = src
        else:
            layers.append(self.new_layer(g, m, "Transpose", [src], [k], {"perm": perm}, suffix="/k_transpose"))
        mask = m.get("mask", "")
        if "where" in m.binds:     # Where(c, s, fill) = s + Where(c, 0, fill − s) ≈ s + Where(c, 0, fill) for −big fill
            fill = m["fill.value"]
            zero = net.add_constant(net.unique_name(f"{m.root.name}/zero"), fill.new_zeros(()))
            wmask = self.fresh_tensor(g, f"{m.root.name}/where_mask")
            layers.append(self.new_layer(g, m, "Where", [m["cond"], zero, m["fill"]], [wmask], suffix="/mask_where"))
            if mask:
                both = self.fresh_tensor(g, f"{m.root.name}/mask")
                layers.append(self.new_layer(g, m, "Add", [wmask, mask], [both], suffix="/mask_add"))
                mask = both
            else:
                mask = wmask
        inputs = [m["q"], k, m["v"]] + ([mask] if mask else [])
        attrs = {"scale": m["scale"], "nan_to_zero": int("nan_guard" in m.binds)}
        layers.append(self.new_layer(g, m, "Attention", inputs, attrs=attrs))
        return layers


RULES = [ScaledDotProductAttention()]
