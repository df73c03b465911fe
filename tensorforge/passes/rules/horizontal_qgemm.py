"""Horizontal fusion of quantized GEMMs: sibling QuantizedMatMuls of one quantized input ⇒ one wider
QuantizedMatMul + Split (the Q/K/V projections of an INT8/FP8 transformer, implicit or from Q/DQ models).

        ┌─► QuantizedMatMul(x_q, W₁; s₁, b₁) ─► y₁                       (each: W (Nᵢ, K) int8/fp8 constant,
   x_q ─┼─► QuantizedMatMul(x_q, W₂; s₂, b₂) ─► y₂          ⇒             per-channel scales sᵢ, bias bᵢ)
        └─► QuantizedMatMul(x_q, W₃; s₃, b₃) ─► y₃
   x_q ─► QuantizedMatMul(x_q, [W₁;W₂;W₃]; [s₁|s₂|s₃], [b₁|b₂|b₃]) ─► Split(N₁, N₂, N₃; axis −1) ─► y₁, y₂, y₃

Math: output column n of the wide product is Σ_k x[m, k]·W[n, k] in int32 (exact) times x_scale·s[n], + b[n], the
activation and the output Q — every step elementwise per column, so each yᵢ is bit for bit what its own
QuantizedMatMul computes. Members must agree on everything that is not per column: the weight dtype, K, the
activation, the output (float type, or the same Q scale, zero point and type); none may add a residual, a
post-Q bias, a mid Q/DQ or a second output, or carry weight zero points. Traffic: x_q read once instead of n
times, one launch instead of n (at batch 1 each GEMM is latency bound: BERT-base at 128 tokens has 24 output
tiles of 64×64 per projection, 72 together). Entry point: the horizontal-gemm pass (horizontal_gemm.py) runs
this rule after the float one.
"""

import torch

from ...ir import Layer
from ..pattern import Graph
from .base import Rule

CORES = ("QuantizedMatMul",)
_SHARED = ("x_dtype", "x_scale", "x_zero_point", "activation", "alpha", "beta", "residual_first", "y_scale",
           "y_zero_point", "y_dtype")


class HorizontalQuantizedGemm(Rule):
    name = "x_q·[W₁;W₂;…] (quantized) ⇒ Split(QuantizedMatMul)"
    cores = CORES

    @staticmethod
    def describe(layer: Layer, g: Graph, siblings: list[Layer]) -> tuple[dict | None, str | None]:
        """The member's form {w, scales, bias, k, n, dtype, shared attrs}, or (None, reason)."""
        a = layer.attrs
        if any(i for i in layer.inputs[3:]):
            return None, "it adds a residual or a post-Q bias"
        if a.get("mid_scale") or a.get("out2_scale") or a.get("w_zero_point"):
            return None, "it has a mid Q/DQ, a second output or weight zero points"
        w = g.constant(layer.inputs[1]) if len(layer.inputs) > 1 and layer.inputs[1] else None
        if w is None or w.dim() != 2:
            return None, "its weight is not a constant (N, K) matrix"
        n, k = int(w.shape[0]), int(w.shape[1])
        scales = [float(s) for s in a["w_scale"]]
        if len(scales) not in (1, n):
            return None, f"{len(scales)} weight scales for {n} output channels"
        bias = None
        if len(layer.inputs) > 2 and layer.inputs[2]:
            bias = g.constant(layer.inputs[2])
            if bias is None or bias.numel() != n:
                return None, "its bias is not a constant of one value per output channel"
            bias = bias.reshape(-1)
        return {"w": w, "scales": scales * (n if len(scales) == 1 else 1), "bias": bias, "k": k, "n": n,
                "dtype": w.dtype, "shared": tuple((key, a.get(key)) for key in _SHARED)}, None

    @staticmethod
    def key(d: dict) -> tuple:
        return d["k"], d["dtype"], d["shared"]

    @staticmethod
    def difference(d: dict, ref: dict, ref_name: str) -> str:
        if (d["k"], d["dtype"]) != (ref["k"], ref["dtype"]):
            return f"its K, weight dtype {d['k']}, {d['dtype']} differ from {ref['k']}, {ref['dtype']} of {ref_name!r}"
        diff = [key for (key, v), (_, r) in zip(d["shared"], ref["shared"]) if v != r]
        if diff:
            return f"its {', '.join(diff)} differ from sibling {ref_name!r}'s"
        return "no sibling to fuse with"

    def rewrite_group(self, members: list[tuple[Layer, dict]], g: Graph) -> list[Layer]:
        """[the wide QuantizedMatMul, Split] producing every member's output."""
        descs = [d for _, d in members]
        bias = None
        if any(d["bias"] is not None for d in descs):      # float32: the epilogue adds bias.float() (exact widening)
            bias = torch.cat([d["bias"].float() if d["bias"] is not None else torch.zeros(d["n"]) for d in descs])
        attrs = dict(members[0][0].attrs, w_scale=[s for d in descs for s in d["scales"]])
        return wide_product_and_split(self, members, g, "QuantizedMatMul", torch.cat([d["w"] for d in descs]),
                                      bias, attrs)


def wide_product_and_split(rule: Rule, members: list[tuple[Layer, dict]], g: Graph, op: str, w: torch.Tensor,
                           bias: torch.Tensor | None, attrs: dict) -> list[Layer]:
    """[op(A, W [, bias]) ─► wide, Split(wide; N₁, N₂, … on the last axis) ─► each member's output], placed for the
    first member (its name stem, every member's ONNX origin); `w`, `bias` are the stacked constants."""
    net, first = g.net, members[0][0]
    inputs = [first.inputs[0], net.add_constant(net.unique_name(f"{first.name}/horizontal_weight"), w.contiguous())]
    if bias is not None:
        inputs.append(net.add_constant(net.unique_name(f"{first.name}/horizontal_bias"), bias.contiguous()))
    sizes = net.add_constant(net.unique_name(f"{first.name}/horizontal_sizes"),
                             torch.tensor([d["n"] for _, d in members], dtype=torch.int64))
    wide = rule.fresh_tensor(g, f"{first.name}/horizontal_output")
    origin = list(dict.fromkeys(o for layer, _ in members for o in layer.origin))
    return [Layer(net.unique_name(f"{first.name}/horizontal_gemm"), op, inputs, [wide], attrs, origin),
            Layer(net.unique_name(f"{first.name}/horizontal_split"), "Split", [wide, sizes],
                  [layer.outputs[0] for layer, _ in members], {"axis": -1, "num_outputs": 0}, origin)]


RULE = HorizontalQuantizedGemm()
