"""Tactics: MatMulEpilogue and Gemm on the CPU as oneDNN matmul primitives created once per row count.

    y = post_ops(x · W + bias)      x (…, K) seen as M = x.numel() / K rows, W (K, N) (stored (N, K) when trans_b /
                                    transB), bias one value or N; post_ops in the layer's order: the activation
                                    (an eltwise post-op) and the residual add (a binary post-op) before or after it
Per call: the output allocation, the data pointers set on the primitive's memories and one
`dnnl_primitive_execute` (kernels/onednn_capi.py). torch's `mkldnn._linear_pointwise` (cpu_onednn.py, the same
library) creates the primitive descriptor on every call, 15–35 µs that dominate the small GEMMs of a
transformer at batch 1 or an MLP. W is reordered once into the layout the primitive asks for, per (weight tensor,
layout): once per engine (onednn_capi.packed_weight). Traffic: x and the packed W read once, the bias and the
residual once, y written once.
Taken: float32, a 2-D weight, scale 1 (MatMulEpilogue) / α = 1, transA = 0 (Gemm), any epilogue activation but
PRelu, a residual of exactly y's shape. Everything else is refused with its reason (supports() / fits()); a kernel
handed such operands raises, it never falls back. Chosen by timing on the CPU against the other linear tactics.
"""

import torch

from . import onednn_capi as dn
from .cpu_onednn import bias_length_reason, gemm_c_reason, gemm_form_reason, refuse
from .registry import tactic
from .torch_fused import epilogue_attrs, epilogue_operands


def _operand_reason(a, b, trans_b: bool, bias, residual, what: str = "a bias") -> str | None:
    if a is None or b is None:
        return None
    if b.dim() != 2:
        return f"a batched ({b.dim()}-D) weight: the matmul primitive here takes one 2-D weight"
    if a.dtype != torch.float32 or b.dtype != torch.float32:
        return f"operands {a.dtype} · {b.dtype}: this tactic runs float32"
    why = bias_length_reason(b, trans_b, bias, what)
    if why is not None:
        return why
    if residual is not None:
        out = (*a.shape[:-1], b.shape[0] if trans_b else b.shape[1])
        if tuple(residual.shape) != out:
            return f"residual {tuple(residual.shape)} is not y's shape {out} (the binary post-op adds it as is)"
    return None


class MatMulPrimitive(dn.WeightedPrimitive):
    """One matmul primitive for (M, K, N), a bias or none, and one post-op list
    posts: [("act", act, alpha, beta) | ("add",)] in order. Execute operands: x, packed W, [bias], y, [residual]."""

    def __init__(self, lib, m: int, k: int, n: int, has_bias: bool, posts: tuple):
        src, dst = lib.md([m, k], [k, 1]), lib.md([m, n], [n, 1])
        wany = lib.md_any([k, n])
        bias = lib.md([1, n], [n, 1]) if has_bias else None
        self.k, self.n = k, n

        def create(pd, attr):
            return lib.c.dnnl_matmul_primitive_desc_create(pd, lib.engine, src.handle, wany.handle,
                                                           bias.handle if bias else None, dst.handle, attr)
        super().__init__(lib, src, wany, bias, dst, posts, create, f"matmul ({m}, {k}) · ({k}, {n})")

    def packed(self, lib, w: torch.Tensor, trans_b: bool) -> torch.Tensor:
        """W (K, N) in this primitive's layout, read from the stored (N, K) (trans_b) or (K, N) weight
        (onednn_capi.PackedSlot: once per engine and layout)."""
        return self.weights.get(lib, w, lambda: (w.detach().to(torch.float32).contiguous(), [self.k, self.n],
                                                 [1, self.k] if trans_b else [self.n, 1]))


class MatMulRunner:
    """run(a, b, bias, residual) -> y: a primitive per (rows, bias?, residual?, thread count — made under the count
    it runs at, as oneDNN sizes its thread team at creation) made on first use and kept; the bias converted once per
    bias tensor seen."""

    def __init__(self, trans_b: bool, act="none", alpha=0.0, beta=0.0, res_first=0):
        self.trans_b, self.lib = trans_b, dn.library()
        act_post = () if act == "none" else (("act", act, alpha, beta),)
        self.posts = {False: act_post, True: (("add",),) + act_post if res_first else act_post + (("add",),)}
        self.prims = dn.PrimitiveTable()
        self.bias = dn.LastDerived()

    def __call__(self, a, b, bias=None, residual=None):
        k = a.shape[-1]
        n = b.shape[0] if self.trans_b else b.shape[1]
        x = a.reshape(-1, k).contiguous()
        m = x.shape[0]
        posts = self.posts[residual is not None]
        p = self.prims.get((m, bias is not None, residual is not None, torch.get_num_threads()),
                           lambda: MatMulPrimitive(self.lib, m, k, n, bias is not None, posts))
        y = torch.empty((*a.shape[:-1], n))
        operands = [x, p.packed(self.lib, b, self.trans_b)]
        if bias is not None:
            operands.append(self.bias.get(bias, lambda: dn.bias_vector(bias, n)))
        operands.append(y)
        if residual is not None:
            operands.append(residual.to(torch.float32).contiguous())
        p.prim.execute([t.data_ptr() for t in operands])
        return y


@tactic("MatMulEpilogue", name="cpu_dnnl", priority=21)
class DnnlMatMulEpilogue:
    @staticmethod
    def supports(layer, device):
        why = dn.tactic_reason(layer, device)
        if why is not None:
            return why
        if float(layer.attrs.get("scale", 1.0)) != 1.0:
            return f"scale {layer.attrs.get('scale')} ≠ 1 (the bias is added inside the product here)"
        act, alpha, beta, _ = epilogue_attrs(layer.attrs)
        if act != "none" and dn.eltwise(act, alpha, beta) is None:
            return f"activation {act} has no oneDNN eltwise post-op"
        return None

    @staticmethod
    def fits(layer, cfg, inputs):
        a, b, bias, residual = epilogue_operands(inputs)
        return _operand_reason(a, b, bool(int(layer.attrs.get("trans_b", 0))), bias, residual)

    @staticmethod
    def build(layer, cfg, device):
        trans_b = bool(int(layer.attrs.get("trans_b", 0)))
        run = MatMulRunner(trans_b, *epilogue_attrs(layer.attrs))

        def kernel(inputs):
            a, b, bias, residual = epilogue_operands(inputs)
            why = _operand_reason(a, b, trans_b, bias, residual)
            if why is not None:
                refuse(layer, "cpu_dnnl", why)
            return [run(a, b, bias, residual)]
        return kernel


@tactic("Gemm", name="cpu_dnnl", priority=21)
class DnnlGemm:
    """Gemm(A, B, C) with transA = 0, α = 1 and C a bias of one or N values (β·C made once per C tensor)."""

    @staticmethod
    def supports(layer, device):
        return dn.tactic_reason(layer, device) or gemm_form_reason(layer)

    @staticmethod
    def fits(layer, cfg, inputs):
        a, b = inputs[0], inputs[1]
        c = inputs[2] if len(inputs) > 2 else None
        return (_operand_reason(a, b, bool(layer.attrs.get("transB", 0)), None, None)
                or gemm_c_reason(layer, b, c))

    @staticmethod
    def build(layer, cfg, device):
        trans_b, beta = bool(int(layer.attrs.get("transB", 0))), float(layer.attrs.get("beta", 1.0))
        run = MatMulRunner(trans_b)
        scaled = dn.LastDerived()                         # β·C, made once per C tensor seen

        def kernel(inputs):
            why = DnnlGemm.fits(layer, cfg, inputs)
            if why is not None:
                refuse(layer, "cpu_dnnl", why)
            a, b = inputs[0], inputs[1]
            c = inputs[2] if len(inputs) > 2 and beta != 0 else None
            if c is None:
                return [run(a, b, None)]
            return [run(a, b, scaled.get(c, lambda: (c.reshape(-1).to(torch.float32) * beta).contiguous()))]
        return kernel
