"""Tactic: Attention as a hand-written Triton flash-attention forward kernel.

For each (batch, head) and block of BLOCK_M queries, the kernel walks the keys in blocks of BLOCK_N keeping a
running row max m, running sum l and the un-normalised output acc in registers (online softmax, base-2
exponentials with the scale folded into log₂e):

    s = q·kᵀ·scale·log₂e + mask·log₂e;  m' = max(m, rowmax s);  p = 2^(s − m');  l = l·2^(m − m') + Σp;
    acc = acc·2^(m − m') + p·v;          out = acc / l

so the Sq×Sk scores never reach memory: traffic is q + k·⌈Sq/BLOCK_M⌉ + v·⌈Sq/BLOCK_M⌉ + mask + out. The
mask (additive float, or bool = keep) is read through broadcast strides (0 on broadcast dims), so BERT's
(B, 1, 1, Sk) mask is never expanded. Head dims up to 256 (padded to a power of two). float16/bfloat16 use
tensor cores with float32 accumulation; p is rounded to v's dtype for the second product, as flash attention does.
"""

import math

import torch
import triton
import triton.language as tl

from .registry import tactic, triton_device_reason
from .quant_store import coded_output, quant_attrs, store_codes

CONFIGS = [{"BM": 128, "BN": 64, "warps": 8, "stages": 2}, {"BM": 64, "BN": 64, "warps": 4, "stages": 2},
           {"BM": 128, "BN": 32, "warps": 4, "stages": 3}, {"BM": 64, "BN": 32, "warps": 4, "stages": 3}]
LOG2E = 1.4426950408889634


@triton.jit
def _attention_kernel(Q, K, V, Mask, O, H, SQ, SK, D, DV, sq_z, sq_h, sq_m, sq_d, sk_z, sk_h, sk_n, sk_d,
                      sv_z, sv_h, sv_n, sv_d, sm_z, sm_h, sm_m, sm_n, so_z, so_h, so_m, so_d, qk_scale,
                      MASK_KIND: tl.constexpr, NAN_TO_ZERO: tl.constexpr, PRECISION: tl.constexpr,
                      BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr, QO=None, qo_scale=1.0,
                      qo_r=1.0, qo_zp=0.0, qo_lo=0.0, qo_hi=0.0, QO_KIND: tl.constexpr = 0,
                      STORE_O: tl.constexpr = True):
    # QO_KIND 1 (int8/uint8) / 2 (float8 E4M3): also QO = QuantizeLinear(out as stored in O's dtype), laid out
    # like O (the next GEMM's Q: AttentionQuantize); STORE_O False: out is rounded for the Q but not written
    pid_m = tl.program_id(0)
    zh = tl.program_id(1)
    z = (zh // H).to(tl.int64)
    h = (zh % H).to(tl.int64)
    rm = pid_m * BM + tl.arange(0, BM)
    rd = tl.arange(0, BD)
    rdv = tl.arange(0, BDV)
    rn0 = tl.arange(0, BN)
    q = tl.load(Q + z * sq_z + h * sq_h + rm[:, None] * sq_m + rd[None, :] * sq_d,
                mask=(rm[:, None] < SQ) & (rd[None, :] < D), other=0.0)
    m_i = tl.full([BM], -float("inf"), tl.float32)
    l_i = tl.zeros([BM], dtype=tl.float32)
    acc = tl.zeros([BM, BDV], dtype=tl.float32)
    for start in range(0, SK, BN):
        rn = start + rn0
        kt = tl.load(K + z * sk_z + h * sk_h + rn[None, :] * sk_n + rd[:, None] * sk_d,
                     mask=(rn[None, :] < SK) & (rd[:, None] < D), other=0.0)
        s = tl.dot(q, kt, input_precision=PRECISION) * qk_scale
        valid = (rn[None, :] < SK) & (rm[:, None] < SQ)
        if MASK_KIND == 1:      # additive float mask
            mk = tl.load(Mask + z * sm_z + h * sm_h + rm[:, None] * sm_m + rn[None, :] * sm_n, mask=valid, other=0.0)
            s += mk.to(tl.float32) * 1.4426950408889634
        if MASK_KIND == 2:      # boolean mask: True keeps
            keep = tl.load(Mask + z * sm_z + h * sm_h + rm[:, None] * sm_m + rn[None, :] * sm_n, mask=valid, other=0)
            s = tl.where(keep != 0, s, -float("inf"))
        s = tl.where(rn[None, :] < SK, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(V + z * sv_z + h * sv_h + rn[:, None] * sv_n + rdv[None, :] * sv_d,
                    mask=(rn[:, None] < SK) & (rdv[None, :] < DV), other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new
    if NAN_TO_ZERO:     # fully masked (l = 0) or NaN rows read 0, as Where(IsNaN(P), 0, P) makes them
        out = tl.where(l_i[:, None] > 0, acc / l_i[:, None], 0.0)
    else:
        out = acc / l_i[:, None]
    o_offs = z * so_z + h * so_h + rm[:, None] * so_m + rdv[None, :] * so_d
    o_mask = (rm[:, None] < SQ) & (rdv[None, :] < DV)
    if STORE_O:
        tl.store(O + o_offs, out.to(O.dtype.element_ty), mask=o_mask)
    if QO_KIND != 0:
        store_codes(QO + o_offs, out.to(O.dtype.element_ty), o_mask, qo_scale, qo_r, qo_zp, qo_lo, qo_hi, QO_KIND)


def _as4d(t: torch.Tensor) -> torch.Tensor:
    """(…, S, D) → (Z, H, S, D): rank 2/3 gain unit dims; ranks above 4 fold their extra leading dims into Z."""
    while t.dim() < 4:
        t = t.unsqueeze(0)
    if t.dim() > 4:
        t = t.reshape(-1, *t.shape[-3:])
    return t


def _pow2(n: int) -> int:
    return 1 << max(4, (n - 1).bit_length())


def attention(q, k, v, mask=None, scale=None, cfg=None, allow_tf32=None, nan_to_zero=0, quant: dict | None = None):
    """softmax(q·kᵀ·scale + mask)·v through the Triton kernel (launcher shared by the tactic and tests). `quant`
    ({scale, zero_point, dtype, store_y}): (out, Q(out)) with the per-tensor Q of out as stored, in out's memory
    layout; out None and never written when not store_y."""
    cfg = {**CONFIGS[1], **(cfg or {})}
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    sq, d, sk, dv = q.shape[-2], q.shape[-1], k.shape[-2], v.shape[-1]
    if d > 256 or dv > 256:
        raise ValueError(f"head dims {d}/{dv} exceed 256")
    q4, k4, v4 = (_as4d(t.expand(*batch, *t.shape[-2:])) for t in (q, k, v))
    if len(batch) == 2:     # (B, H, S, D) written in (B, S, H, D) memory, as flash attention does: the usual
        # Transpose(0, 2, 1, 3) → Reshape(B, S, H·D) before the output projection is then a view, not a copy
        out = torch.empty(batch[0], sq, batch[1], dv, dtype=q.dtype, device=q.device).transpose(1, 2)
    else:
        out = torch.empty(*batch, sq, dv, dtype=q.dtype, device=q.device)
    o4 = _as4d(out)
    zdim, hdim = q4.shape[0], q4.shape[1]
    kind, m4 = 0, o4
    if mask is not None:
        kind = 2 if mask.dtype == torch.bool else 1
        m4 = _as4d(mask.expand(*batch, sq, sk))
    q_args, codes = {}, None
    if quant is not None:
        codes, q_args = coded_output(quant, out.shape, out.device, out.stride(), "QO", "qo_", "STORE_O")
        q_args["QO"] = _as4d(codes)
    result = out if quant is None else (out if quant.get("store_y", True) else None, codes)
    if out.numel() == 0:
        return result
    s = scale if scale is not None else 1.0 / math.sqrt(d)
    if allow_tf32 is None:
        allow_tf32 = torch.backends.cuda.matmul.allow_tf32
    precision = "tf32" if (q.dtype == torch.float32 and allow_tf32 and q.device.type == "cuda") else "ieee"
    grid = (triton.cdiv(sq, cfg["BM"]), zdim * hdim)
    _attention_kernel[grid](q4, k4, v4, m4, o4, hdim, sq, sk, d, dv, *q4.stride(), *k4.stride(), *v4.stride(),
                            *m4.stride(), *o4.stride(), s * LOG2E, MASK_KIND=kind, NAN_TO_ZERO=bool(nan_to_zero),
                            PRECISION=precision,
                            BM=cfg["BM"], BN=cfg["BN"], BD=_pow2(d), BDV=_pow2(dv), num_warps=cfg["warps"],
                            num_stages=cfg["stages"], **q_args)
    return result


@tactic("Attention", name="triton_flash", configs=CONFIGS, priority=1)
class TritonAttention:
    @staticmethod
    def supports(layer, device):
        why = triton_device_reason(device)
        if why is not None:
            return why
        return None

    @staticmethod
    def build(layer, cfg, device):
        scale, nan_to_zero = layer.attrs.get("scale"), layer.attrs.get("nan_to_zero", 0)

        def run(inputs):
            mask = inputs[3] if len(inputs) > 3 else None
            return [attention(inputs[0], inputs[1], inputs[2], mask, scale, cfg, nan_to_zero=nan_to_zero)]
        return run


@tactic("AttentionQuantize", name="triton_flash", configs=CONFIGS, priority=1)
class TritonAttentionQuantize:
    """Attention and the next GEMM's per-tensor Q in the flash kernel's store (ir/ops/quantized.py): the output is
    written as 1-byte codes (and in float only where another layer reads it)."""
    supports = staticmethod(TritonAttention.supports)

    @staticmethod
    def build(layer, cfg, device):
        scale, nan_to_zero = layer.attrs.get("scale"), layer.attrs.get("nan_to_zero", 0)
        quant = quant_attrs(layer)

        def run(inputs):
            mask = inputs[3] if len(inputs) > 3 else None
            return list(attention(inputs[0], inputs[1], inputs[2], mask, scale, cfg, nan_to_zero=nan_to_zero,
                                  quant=quant))
        return run
