"""Tactics for onnxruntime's attention contrib ops (ir/ops/contrib_attention.py) through
`F.scaled_dot_product_attention` (flash / memory-efficient kernels on CUDA, fused CPU attention), as the fused
Attention op's torch_sdpa tactic (torch_fused.py) runs: the operands (heads, bias, packed inputs, caches, rotary,
masks) come from the IR module's own helpers, only the score/softmax/PV part changes, so scores are never written.

    MultiHeadAttention:  SDPA(Q, [past, K], [past, V], mask + causal(j ≤ i + P) as one additive mask)
    GroupQueryAttention: SDPA(Q, present_k, present_v, attended-keys mask (+ attention_bias), enable_gqa)
Not for: the qk output (it is the score matrix), softcap / head_sink / smooth_softmax (SDPA has no hook for them).
Traffic: Q, K, V read once, Y written once; the (B, 1|N, S, T) mask is read by the kernel.
"""

import math

import torch
import torch.nn.functional as F

from ..ir.ops.contrib_attention import gqa_operands, mha_operands
from .registry import tactic


def _mha_reason(layer, device):
    if len(layer.outputs) > 3:
        return "the qk output is the score matrix, which SDPA does not return"
    return None


@tactic("MultiHeadAttention", name="torch_sdpa", priority=5)
class MultiHeadAttentionSDPA:
    supports = staticmethod(_mha_reason)

    @staticmethod
    def build(layer, cfg, device):
        a, n_out = layer.attrs, len(layer.outputs)

        def run(inputs):
            query, key, value, bias, kpm, ab, past_k, past_v = (list(inputs) + [None] * 8)[:8]
            q4, k4, v4, mask = mha_operands(query, key, value, bias, kpm, ab, past_k, a["num_heads"],
                                            a.get("mask_filter_value", -10000.0), a.get("unidirectional", 0))
            if past_k is not None:
                k4, v4 = torch.cat([past_k, k4], dim=2), torch.cat([past_v, v4], dim=2)
            sq, total = q4.shape[2], k4.shape[2]
            if a.get("unidirectional", 0):          # key j ≤ query i + the past length (as the reference)
                i = torch.arange(sq, device=q4.device).reshape(sq, 1) + (past_k.shape[2] if past_k is not None else 0)
                causal = torch.where(torch.arange(total, device=q4.device).reshape(1, total) <= i,
                                     torch.zeros((), dtype=q4.dtype, device=q4.device),
                                     torch.full((), -math.inf, dtype=q4.dtype, device=q4.device))
                mask = causal if mask is None else mask + causal
            y4 = F.scaled_dot_product_attention(q4, k4, v4, attn_mask=mask, scale=a.get("scale") or None)
            y = y4.transpose(1, 2).reshape(q4.shape[0], sq, -1)
            return [y, k4, v4][:n_out]
        return run


def _gqa_reason(layer, device):
    a = layer.attrs
    if a.get("softcap", 0.0) > 0:
        return "softcap bends the scores before the softmax; SDPA has no hook for it"
    if a.get("smooth_softmax", 0) or (len(layer.inputs) > 11 and layer.inputs[11]):
        return "a head_sink / smooth_softmax logit joins the softmax denominator; SDPA has none"
    return None


@tactic("GroupQueryAttention", name="torch_sdpa", priority=5)
class GroupQueryAttentionSDPA:
    supports = staticmethod(_gqa_reason)

    @staticmethod
    def build(layer, cfg, device):
        a, n_out = layer.attrs, len(layer.outputs)

        def run(inputs):
            args = (list(inputs) + [None] * 12)[:12]
            q4, present_k, present_v, keep = gqa_operands(
                *args[:10], num_heads=a["num_heads"], kv_num_heads=a["kv_num_heads"], do_rotary=a.get("do_rotary", 0),
                rotary_interleaved=a.get("rotary_interleaved", 0), causal=a.get("causal", 1),
                local_window_size=a.get("local_window_size", -1))
            mask = keep
            if args[10] is not None:          # attention_bias: additive, −∞ where no key is attended
                bias = args[10].to(q4.dtype)[..., :present_k.shape[2]]
                mask = torch.where(keep, bias, torch.full((), -math.inf, dtype=q4.dtype, device=q4.device))
            y4 = F.scaled_dot_product_attention(q4, present_k, present_v, attn_mask=mask, scale=a.get("scale") or None,
                                                enable_gqa=True)
            y = y4.transpose(1, 2).reshape(q4.shape[0], q4.shape[2], -1)
            return [y, present_k, present_v][:n_out]
        return run
