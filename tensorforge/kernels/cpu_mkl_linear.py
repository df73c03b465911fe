"""Tactics: MatMulEpilogue and Gemm on the CPU as MKL's packed sgemm (`torch.ops.mkl._mkl_linear`), the epilogue
in place.

    y = act(x · Wᵀ + bias [+ residual]) [+ residual]      one packed GEMM (bias in it), then torch's in-place epilogue
    Gemm: y = A · op(B) + β·C  with transA = 0, α = 1 and C one value or one per output column (β·C made once)

The weight is packed once per (weight tensor, row count) with `mkl._mkl_reorder_linear_weight` (MKL's
cblas_sgemm_pack: the B panels in the order its micro-kernel streams them, for exactly M rows); a call with that
M multiplies the packed panels, any other M goes through torch's plain linear on the same weight (the op's own
rule, the same numbers up to summation order). Why beside onednn_linear: at the small row counts of batch-1
transformers and MLPs on 2 cores oneDNN's per-call set-up is a large share (measured here, medians of 300 calls:
32×256·256×1024 oneDNN 70 µs against 57 µs packed MKL; 64×128·128×128 26 against 16 µs; 128×768·768×3072 1.89
against 1.78 ms), so the builder times both and keeps the faster per layer. Traffic: x, the packed W, the bias
once; y written once and rewritten by the epilogue (activation, residual) in place.
float32 only (MKL's packed sgemm); CPU devices whose torch has MKL. No silent fallback: operands it does not take
are rejected by fits() at build (with the reason) and raise at run time.
"""

import torch

from .cpu_onednn import PackedWeight, bias_length_reason, cpu_op_reason, gemm_c_reason, gemm_form_reason, refuse
from .registry import tactic
from .torch_fused import epilogue_, epilogue_attrs, epilogue_operands


def mkl_reason(device) -> str | None:
    return cpu_op_reason(device, "MKL packed linear", torch.backends.mkl.is_available(), torch.ops.mkl, "_mkl_linear")


def operand_reason(a, b) -> str | None:
    if a is None or b is None:
        return None
    if b.dim() != 2:
        return f"a batched ({b.dim()}-D) weight: the packed GEMM takes one 2-D weight"
    if a.dtype != torch.float32 or b.dtype != torch.float32:
        return f"operands {a.dtype} · {b.dtype}: MKL's packed sgemm takes float32"
    return None


def mkl_weight(trans: bool) -> PackedWeight:
    """W packed by MKL for exactly M rows (again when M changes), the (N, K) copy kept for `_mkl_linear`."""
    return PackedWeight(trans, reorder=lambda w_nk, rows: torch.ops.mkl._mkl_reorder_linear_weight(w_nk, rows),
                        per_rows=True, keep_plain=True)


def mkl_linear(x: torch.Tensor, w: torch.Tensor, pack: PackedWeight, bias_make, c) -> torch.Tensor:
    """x (M, K) · Wᵀ (+ the N-vector bias_make(c) made once per c tensor) through the packed panels."""
    packed, w_nk, _ = pack.get(w, x.shape[0])
    bias = pack.bias(c, bias_make) if c is not None else None
    return torch.ops.mkl._mkl_linear(x, packed, w_nk, bias, x.shape[0])


@tactic("MatMulEpilogue", name="mkl_packed", priority=15)
class MklMatMulEpilogue:
    @staticmethod
    def supports(layer, device):
        why = mkl_reason(device)
        if why is not None:
            return why
        if layer.precision not in (None, "float32"):
            return f"a {layer.precision} layer (MKL's packed sgemm is float32)"
        if float(layer.attrs.get("scale", 1.0)) != 1.0:
            return f"scale {layer.attrs.get('scale')} ≠ 1 (the packed GEMM has no output scale)"
        return None

    @staticmethod
    def fits(layer, cfg, inputs):
        a, b = inputs[0], inputs[1] if len(inputs) > 1 else None
        bias = inputs[2] if len(inputs) > 2 else None
        return operand_reason(a, b) or bias_length_reason(b, bool(int(layer.attrs.get("trans_b", 0))), bias, "a bias")

    @staticmethod
    def build(layer, cfg, device):
        a_ = layer.attrs
        act, alpha, beta, res_first = epilogue_attrs(a_)
        trans_b = bool(int(a_.get("trans_b", 0)))
        pack = mkl_weight(trans=trans_b)

        def run(inputs):
            a, b, bias, residual = epilogue_operands(inputs)
            why = operand_reason(a, b)
            if why is not None:
                refuse(layer, "mkl_packed", why)
            n = b.shape[0] if trans_b else b.shape[1]
            y = mkl_linear(a.reshape(-1, a.shape[-1]).contiguous(), b, pack,
                           lambda t: t.reshape(-1).to(a.dtype).expand(n).contiguous(), bias)
            return [epilogue_(y.view(*a.shape[:-1], y.shape[-1]), residual, act, alpha, beta, res_first)]
        return run


@tactic("Gemm", name="mkl_packed", priority=15)
class MklGemm:
    """Gemm(A, B, C) with transA = 0, α = 1 and C a bias of 1 or N values (β·C folded once per C tensor)."""

    @staticmethod
    def supports(layer, device):
        why = mkl_reason(device)
        if why is None and layer.precision not in (None, "float32"):
            why = f"a {layer.precision} layer (MKL's packed sgemm is float32)"
        return why or gemm_form_reason(layer)

    @staticmethod
    def fits(layer, cfg, inputs):
        a, b = inputs[0], inputs[1]
        why = operand_reason(a, b) or (f"a {a.dim()}-D A (Gemm multiplies matrices)" if a.dim() != 2 else None)
        return why or gemm_c_reason(layer, b, inputs[2] if len(inputs) > 2 else None)

    @staticmethod
    def build(layer, cfg, device):
        a_ = layer.attrs
        trans_b, beta = int(a_.get("transB", 0)), float(a_.get("beta", 1.0))
        pack = mkl_weight(trans=bool(trans_b))

        def run(inputs):
            why = MklGemm.fits(layer, cfg, inputs)
            if why is not None:
                refuse(layer, "mkl_packed", why)
            a, b = inputs[0], inputs[1]
            c = inputs[2] if len(inputs) > 2 and beta != 0 else None
            n = b.shape[0] if trans_b else b.shape[1]
            return [mkl_linear(a.contiguous(), b, pack, lambda t: (t.reshape(-1).to(a.dtype).expand(n) * beta)
                               .contiguous(), c)]
        return run
