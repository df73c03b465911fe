"""Horizontal GEMM fusion: sibling products of one input with constant weights ⇒ one wider product + Split.

Exporters: every transformer encoder/decoder (BERT, RoBERTa, ViT, GPT-2 from torch.onnx.export) projects the
LayerNorm output to Q, K and V with three Linear layers. At small batch each (M, K)·(K, N) GEMM is latency
bound, so one (M, K)·(K, ΣNᵢ) GEMM costs about what one of them does. Entry point: `fuse_horizontal_gemms`, a
pipeline pass (siblings are a group, not a producer chain, so the root-based `rule_pass` runner does not fit);
`HorizontalGemm` holds the rule's name, check() and rewrite(), and every rejection is kept with its reason.
"""

import torch

from ...ir import Layer, Network
from ...util.log import get_logger
from ..dead_code import remove_dead_layers
from ..pattern import Graph
from .base import Rule, record_rejection
from .epilogue import per_channel_reason
from .horizontal_qgemm import RULE as QUANTIZED
from .horizontal_qgemm import wide_product_and_split     # the wide product + Split, shared by both rules

CORES = ("MatMulEpilogue", "MatMul", "Gemm")


class HorizontalGemm(Rule):
    """Siblings that read the same A, each with a constant weight Bᵢ (K, Nᵢ) and a constant or absent bias:

            ┌─► MatMulEpilogue(A, B₁, b₁) ─► y₁ ─► Reshape ─► Transpose ─► Attention (q)
        A ──┼─► MatMulEpilogue(A, B₂, b₂) ─► y₂ ─► Reshape ─► Transpose ─► Attention (kᵀ)
            └─► MatMulEpilogue(A, B₃, b₃) ─► y₃ ─► Reshape ─► Transpose ─► Attention (v)
      ⇒
        A ─► MatMulEpilogue(A, [B₁|B₂|B₃], [b₁|b₂|b₃]) ─► Split(N₁, N₂, N₃; axis −1) ─► y₁, y₂, y₃

    Members may also be plain MatMul (B 2-D) or Gemm (transA = 0, C a per-column constant, folded as β·C).
    All must share K, B's dtype, trans_b, scale and activation (act(·) is elementwise, so it commutes with the
    column split), and have no residual. An absent bias becomes zeros when another member has one.
    Math: A·[B₁|B₂|B₃] = [A·B₁ | A·B₂ | A·B₃] column block by column block — the same dot products, so the
    results are bit-for-bit those of the separate GEMMs up to the BLAS's blocking.
    Traffic: A is read once instead of n times, the outputs are written once (Split returns column views,
    no copy); launches n → 1. The concatenated weight replaces the n weights (same bytes).
    """

    name = "A·[B₁|B₂|…] + [b₁|b₂|…] ⇒ Split(MatMulEpilogue)"
    cores = CORES

    # ---- one member ------------------------------------------------------------------------------------
    @staticmethod
    def describe(layer: Layer, g: Graph, siblings: list[Layer]) -> tuple[dict | None, str | None]:
        """The member's normalised form {w, bias, trans_b, scale, act, k, n, dtype}, or (None, reason)."""
        sibling_outs = {o: s for s in siblings if s is not layer for o in s.outputs}
        for i in layer.inputs[1:]:
            if i in sibling_outs:
                return None, f"it reads {i!r}, the output of its sibling {sibling_outs[i].name!r}"
        a, w_name = layer.inputs[0], layer.inputs[1] if len(layer.inputs) > 1 else ""
        w = g.constant(w_name)
        if w is None:
            return None, f"the weight {w_name!r} is computed at run time"
        if w.dim() != 2 or not w.dtype.is_floating_point:
            return None, f"the weight {w_name!r} is {w.dtype} of shape {tuple(w.shape)}, not a 2-D float matrix"
        a_dt = g.dtype(a)
        if a_dt is not None and a_dt != w.dtype:
            return None, f"A is {a_dt} but the weight {w_name!r} is {w.dtype}"
        attrs, bias_name = layer.attrs, ""
        if layer.op == "MatMulEpilogue":
            if len(layer.inputs) > 3 and layer.inputs[3]:
                return None, f"it adds the residual {layer.inputs[3]!r}"
            trans_b, scale = int(attrs.get("trans_b", 0)), float(attrs.get("scale", 1.0))
            act = (attrs.get("activation", "none"), float(attrs.get("alpha", 0.0)), float(attrs.get("beta", 0.0)))
            bias_name, beta_c = (layer.inputs[2] if len(layer.inputs) > 2 else ""), 1.0
        elif layer.op == "Gemm":
            if attrs.get("transA", 0):
                return None, "Gemm with transA=1"
            trans_b, scale, act = int(attrs.get("transB", 0)), float(attrs.get("alpha", 1.0)), ("none", 0.0, 0.0)
            bias_name, beta_c = (layer.inputs[2] if len(layer.inputs) > 2 else ""), float(attrs.get("beta", 1.0))
        else:
            trans_b, scale, act, beta_c = 0, 1.0, ("none", 0.0, 0.0), 1.0
        k, n = (w.shape[1], w.shape[0]) if trans_b else (w.shape[0], w.shape[1])
        bias = None
        if bias_name:
            c = g.constant(bias_name)
            why = "computed at run time" if c is None else per_channel_reason(c, "Gemm", 2, n)
            if why:
                return None, f"bias {bias_name!r}: {why}"
            if c.dtype != w.dtype:
                return None, f"bias {bias_name!r} is {c.dtype}, the weight {w.dtype}"
            bias = c.reshape(-1).expand(n) * beta_c if beta_c != 1.0 else c.reshape(-1).expand(n)
        return {"w": w, "bias": bias, "trans_b": trans_b, "scale": scale, "act": act, "k": int(k), "n": int(n),
                "dtype": w.dtype}, None

    @staticmethod
    def key(d: dict) -> tuple:
        return d["k"], d["dtype"], d["trans_b"], d["scale"], d["act"]

    @staticmethod
    def difference(d: dict, ref: dict, ref_name: str) -> str:
        for label, field in (("K", "k"), ("weight dtype", "dtype"), ("trans_b", "trans_b"), ("scale", "scale"),
                             ("activation (name, alpha, beta)", "act")):
            if d[field] != ref[field]:
                return f"its {label} {d[field]} differs from {ref[field]} of sibling {ref_name!r}"
        return "no sibling to fuse with"

    # ---- the group ---------------------------------------------------------------------------------------
    def rewrite_group(self, members: list[tuple[Layer, dict]], g: Graph) -> list[Layer]:
        """[MatMulEpilogue with the concatenated weight and bias, Split] producing every member's output."""
        d0, descs = members[0][1], [d for _, d in members]
        w = torch.cat([d["w"] for d in descs], dim=0 if d0["trans_b"] else 1)
        bias = None
        if any(d["bias"] is not None for d in descs):
            bias = torch.cat([d["bias"] if d["bias"] is not None else torch.zeros(d["n"], dtype=d["dtype"])
                              for d in descs])
        act, alpha, beta = d0["act"]
        return wide_product_and_split(self, members, g, "MatMulEpilogue", w, bias,
                                      {"trans_b": d0["trans_b"], "scale": d0["scale"], "activation": act,
                                       "alpha": alpha, "beta": beta, "residual_first": 0})


def _report(rule: Rule, layer: Layer, reason: str, rejections: list | None) -> None:
    record_rejection(rule.name, layer.name, reason, rejections)


def fuse_horizontal_gemms(net: Network, shape_points: list[dict] | None = None, rejections: list | None = None,
                          max_fold_elements: int = 1 << 24, **_) -> int:
    """Group the MatMulEpilogue/MatMul/Gemm layers by their input A, and the QuantizedMatMul layers by their
    quantized input (horizontal_qgemm.py); fuse each compatible group of ≥ 2 into one product + Split placed at
    the first member's position (every input of the group — A and constants — is available there). Returns the
    number of groups fused."""
    return sum(_fuse_groups(net, rule, shape_points, rejections, max_fold_elements) for rule in (RULE, QUANTIZED))


def _fuse_groups(net: Network, rule, shape_points, rejections, max_fold_elements) -> int:
    g = Graph(net, shape_points or [], max_fold_elements)
    groups: dict[str, list[Layer]] = {}
    for layer in net.layers:
        if layer.op in rule.cores and layer.inputs and layer.inputs[0] and len(layer.outputs) == 1:
            groups.setdefault(layer.inputs[0], []).append(layer)
    replace: dict[int, list[Layer]] = {}
    consumed: set[int] = set()
    for siblings in groups.values():
        if len(siblings) < 2:
            continue
        ok: list[tuple[Layer, dict]] = []
        for layer in siblings:
            d, why = rule.describe(layer, g, siblings)
            if why:
                _report(rule, layer, why, rejections)
            else:
                ok.append((layer, d))
        classes: dict[tuple, list[tuple[Layer, dict]]] = {}
        for layer, d in ok:
            classes.setdefault(rule.key(d), []).append((layer, d))
        ranked = sorted(classes.values(), key=len, reverse=True)
        for members in ranked:
            if len(members) < 2:
                layer, d = members[0]
                others = [c[0] for c in ranked if c[0][0] is not layer]
                why = rule.difference(d, others[0][1], others[0][0].name) if others else \
                    "every sibling reading the same input was rejected"
                _report(rule, layer, why, rejections)
                continue
            replace[id(members[0][0])] = rule.rewrite_group(members, g)
            consumed.update(id(layer) for layer, _ in members)
    if not replace:
        return 0
    kept: list[Layer] = []
    for layer in net.layers:
        if id(layer) in replace:
            kept.extend(replace[id(layer)])
        elif id(layer) not in consumed:
            kept.append(layer)
    net.layers = kept
    remove_dead_layers(net)
    net.prune_tensors()
    get_logger().verbose(f"rule {rule.name}: applied {len(replace)} time(s)")
    return len(replace)


RULE = HorizontalGemm()
