"""onnxruntime's attention contrib ops (com.microsoft) as onnxruntime's CPU kernels compute them.

    MultiHeadAttention  Q (B, S, D) | packed QKV (B, S, N, 3, H);  K, V (B, L, D) | packed KV (B, L, N, 2, H) |
            (B, N, L, H);  + bias (D + D + Dv) on 3-D Q/K/V;  K ← [past_key, K] along the sequence (present_key …)
            mask = mask_filter_value (default −10000, not −∞) where key_padding_mask says padding — (B) lengths,
            (B, T) or (B, S, T) 0/1 — plus attention_bias (B|1, N|1, S, T); unidirectional → causal (j ≤ i + P)
            Y = OnnxAttention(Q, K, V, mask) (ir/ops/attention.py) → (B, S, N·Hv); qk = scale·Q·Kᵀ + mask
    GroupQueryAttention  Q (B, S, Nq·H) (or packed with K, V: (B, S, (Nq + 2·Nkv)·H)), K, V (B, S, Nkv·H),
            past_key/value (B, Nkv, P, H), seqlens_k[b] = T_b − 1, total_sequence_length T (scalar):
              first prompt (S = T): past_b = 0; otherwise past_b = T_b − S
              rotary (do_rotary): Q and the new K rotated at positions past_b + s (or position_ids), with
                cos/sin caches (max_pos, rotary_dim / 2) — the ONNX RotaryEmbedding op's math
              present (B, Nkv, max(T, P), H) = 0, then [0, past_b) ← past, [past_b, past_b + S) ← new K / V
              s = scale·Q·Kᵀ (KV heads shared by Nq/Nkv query heads); softcap c·tanh(s/c); + attention_bias
              key j is attended by query s iff j < T_b, and (causal) j ≤ past_b + s, and (local_window_size W ≥ 0)
              j > past_b + s − W (the W newest keys, as onnxruntime counts its window);
              p = softmax over those keys (a head_sink logit joins the denominator)
              Y (B, S, Nq·H) = p·V
Traffic: Q, K, V and the caches read once, Y and present written once; these references materialise the
(B, N, S, T) scores.
"""

import math

import torch

from ..dynamic import data_dependent
from ..opspec import get_spec, op
from .attention import attention


def _bnsh(x, heads):
    b, s, hidden = x.shape
    return x.reshape(b, s, heads, hidden // heads).transpose(1, 2)


def _unpack(packed, count):
    return [packed[:, :, :, i].transpose(1, 2) for i in range(count)]


def _padding_mask(mask, batch, sq, total, fill, dtype, device):
    """key_padding_mask → additive (B, 1, 1|S, T): 0 where attended, `fill` elsewhere."""
    mask = mask.to(device)
    if mask.dim() == 1:
        keep = torch.arange(total, device=device).reshape(1, total) < mask.to(torch.int64).reshape(-1, 1)
        keep = keep.reshape(batch, 1, 1, total)
    elif mask.dim() in (2, 3):
        if mask.shape[-1] != total:
            raise ValueError(f"key_padding_mask covers {mask.shape[-1]} keys, the attention has {total}")
        keep = (mask > 0).reshape(batch, 1, -1, total)
    else:
        raise ValueError(f"key_padding_mask of rank {mask.dim()}")
    zero = torch.zeros((), dtype=dtype, device=device)
    return torch.where(keep, zero, torch.full((), fill, dtype=dtype, device=device))


def mha_operands(query, key, value, bias, key_padding_mask, attention_bias, past_key, num_heads, mask_filter_value,
                 unidirectional=0):
    """MultiHeadAttention's Q, K, V as (B, N, ·, H) (bias added, packed inputs split) and its additive mask
    (B, 1|N, 1|S, T) or None — shared by the reference and the SDPA tactic."""
    if query.dim() == 5:
        q4, k4, v4 = _unpack(query, 3)
    elif key is None or (key.dim() != 5 and value is None):
        raise ValueError("MultiHeadAttention with a 3-D query needs key and value (packed QKV is 5-D)")
    else:
        if key.dim() == 4 and past_key is not None:
            raise ValueError("MultiHeadAttention with (B, N, L, H) key/value takes no past_key/past_value")
        d = query.shape[-1]
        qb, kb, vb = (None, None, None) if bias is None else (bias[:d], bias[d:2 * d], bias[2 * d:])
        q4 = _bnsh(query if qb is None else query + qb, num_heads)
        if key.dim() == 5:
            k4, v4 = _unpack(key, 2)
        elif key.dim() == 4:
            k4, v4 = key, value
        else:
            k4 = _bnsh(key if kb is None else key + kb, num_heads)
            v4 = _bnsh(value if vb is None else value + vb, num_heads)
    batch, _, sq, _ = q4.shape
    if unidirectional and k4.shape[2] != sq:
        raise ValueError(f"unidirectional MultiHeadAttention with {k4.shape[2]} new keys for {sq} queries is not "
                         "supported (onnxruntime leaves its last query row unmasked there)")
    total = k4.shape[2] + (past_key.shape[2] if past_key is not None else 0)
    mask = None
    if key_padding_mask is not None:
        mask = _padding_mask(key_padding_mask, batch, sq, total, mask_filter_value, q4.dtype, q4.device)
    if attention_bias is not None:
        mask = attention_bias.to(q4.dtype) if mask is None else mask + attention_bias.to(q4.dtype)
    return q4, k4, v4, mask


@op("MultiHeadAttention", attrs={"num_heads": None, "mask_filter_value": -10000.0, "scale": 0.0,
                                 "unidirectional": 0})
def multi_head_attention(query, key=None, value=None, bias=None, key_padding_mask=None, attention_bias=None,
                         past_key=None, past_value=None, *, num_heads, mask_filter_value=-10000.0, scale=0.0,
                         unidirectional=0):
    """com.microsoft MultiHeadAttention (module doc) → (Y, present_key, present_value, qk)."""
    q4, k4, v4, mask = mha_operands(query, key, value, bias, key_padding_mask, attention_bias, past_key, num_heads,
                                    mask_filter_value, unidirectional)
    y4, present_k, present_v, qk = attention(q4, k4, v4, mask, past_key, past_value, scale=scale or None,
                                             is_causal=unidirectional, q_num_heads=num_heads,
                                             kv_num_heads=num_heads, qk_matmul_output_mode=2)
    y = y4.transpose(1, 2).reshape(q4.shape[0], q4.shape[2], -1)
    return y, present_k, present_v, qk


def _gqa_infer(query, key=None, value=None, past_key=None, past_value=None, seqlens_k=None, total_seq=None, *rest,
               num_heads, kv_num_heads, **_):
    b, s = query.shape[:2]
    head = query.shape[2] // (num_heads + (0 if key is not None else 2 * kv_num_heads))
    p_len = past_key.shape[2] if past_key is not None else 0
    y = torch.empty(b, s, num_heads * head, dtype=query.dtype, device="meta")
    if total_seq.device.type == "meta":          # a network input: the cache length is known at run time
        cache = [data_dependent((b, kv_num_heads, max(p_len, s), head), query.dtype) for _ in range(2)]
    else:
        present = max(int(total_seq.reshape(-1)[0]), p_len, s)
        cache = [torch.empty(b, kv_num_heads, present, head, dtype=query.dtype, device="meta") for _ in range(2)]
    return y, cache[0], cache[1]


_GQA_ATTRS = {"num_heads": None, "kv_num_heads": None, "scale": 0.0, "softcap": 0.0, "local_window_size": -1,
              "do_rotary": 0, "rotary_interleaved": 0, "causal": 1, "smooth_softmax": 0}


def _write_cache(past, new, past_b, length):
    """(B, Nkv, length, H): rows [0, past_b) from `past`, [past_b, past_b + S) from `new`, 0 elsewhere — one
    gather and two selects, no host sync (past_b is a device tensor)."""
    batch, heads, sq, head = new.shape
    j = torch.arange(length, device=new.device).reshape(1, 1, length, 1)
    pb = past_b.reshape(-1, 1, 1, 1)
    idx = (j - pb).clamp(0, sq - 1).expand(batch, heads, length, head)
    zero = torch.zeros((), dtype=new.dtype, device=new.device)
    out = torch.where((j >= pb) & (j < pb + sq), new.gather(2, idx), zero)
    if past is not None and past.shape[2]:
        p = past.to(new.dtype)[:, :, :length]
        if p.shape[2] < length:
            p = torch.nn.functional.pad(p, (0, 0, 0, length - p.shape[2]))
        out = torch.where(j < pb, p, out)
    return out


def gqa_operands(query, key, value, past_key, past_value, seqlens_k, total_sequence_length, cos_cache, sin_cache,
                 position_ids, *, num_heads, kv_num_heads, do_rotary, rotary_interleaved, causal, local_window_size):
    """GroupQueryAttention up to the scores (module doc): Q (B, Nq, S, H) rotated, the present caches
    (B, Nkv, P+, H) and the (B, 1, S, P+) bool mask of attended keys — shared by the reference and the SDPA tactic."""
    batch, sq = query.shape[:2]
    if key is None:
        head = query.shape[2] // (num_heads + 2 * kv_num_heads)
        q_, k_, v_ = query.split([num_heads * head, kv_num_heads * head, kv_num_heads * head], dim=2)
    else:
        head = query.shape[2] // num_heads
        q_, k_, v_ = query, key, value
    q4, k4, v4 = _bnsh(q_, num_heads), _bnsh(k_, kv_num_heads), _bnsh(v_, kv_num_heads)
    dev, dt = query.device, query.dtype
    total = int(total_sequence_length.reshape(-1)[0])
    p_len = past_key.shape[2] if past_key is not None else 0
    present_len = max(total, p_len, sq)          # = max(T, P) for valid inputs (T ≥ S); S keeps zeros valid
    t_b = seqlens_k.to(dev).to(torch.int64).reshape(-1) + 1                       # (B,)
    past_b = torch.zeros_like(t_b) if sq == total else t_b - sq                   # first prompt: no past
    if do_rotary:
        pos = (position_ids.to(dev).to(torch.int64) if position_ids is not None
               else past_b.reshape(-1, 1) + torch.arange(sq, device=dev).reshape(1, -1))
        rotary = get_spec("RotaryEmbedding").reference
        rd = cos_cache.shape[1] * 2
        q4, k4 = (rotary(t, cos_cache, sin_cache, pos, interleaved=rotary_interleaved, rotary_embedding_dim=rd,
                         num_heads=0) for t in (q4, k4))
    present_k = _write_cache(past_key, k4, past_b, present_len)
    present_v = _write_cache(past_value, v4, past_b, present_len)
    j = torch.arange(present_len, device=dev).reshape(1, 1, present_len)
    i_abs = past_b.reshape(-1, 1, 1) + torch.arange(sq, device=dev).reshape(1, sq, 1)      # (B, S, 1)
    keep = j < t_b.reshape(-1, 1, 1)
    if causal:
        keep = keep & (j <= i_abs)
    if local_window_size >= 0:
        keep = keep & (j > i_abs - local_window_size)
    return q4, present_k, present_v, keep.unsqueeze(1)


@op("GroupQueryAttention", attrs=dict(_GQA_ATTRS), infer=_gqa_infer, value_inputs=(6,))
def group_query_attention(query, key=None, value=None, past_key=None, past_value=None, seqlens_k=None,
                          total_sequence_length=None, cos_cache=None, sin_cache=None, position_ids=None,
                          attention_bias=None, head_sink=None, *, num_heads, kv_num_heads, scale=0.0, softcap=0.0,
                          local_window_size=-1, do_rotary=0, rotary_interleaved=0, causal=1, smooth_softmax=0):
    """com.microsoft GroupQueryAttention (module doc) → (Y, present_key, present_value)."""
    q4, present_k, present_v, keep = gqa_operands(
        query, key, value, past_key, past_value, seqlens_k, total_sequence_length, cos_cache, sin_cache,
        position_ids, num_heads=num_heads, kv_num_heads=kv_num_heads, do_rotary=do_rotary,
        rotary_interleaved=rotary_interleaved, causal=causal, local_window_size=local_window_size)
    batch, _, sq, head = q4.shape
    dev, dt = query.device, query.dtype
    group = num_heads // kv_num_heads
    kk, vv = present_k.repeat_interleave(group, dim=1), present_v.repeat_interleave(group, dim=1)
    alpha = scale if scale else 1.0 / math.sqrt(head)
    s = torch.matmul(q4.float(), kk.float().transpose(-1, -2)) * alpha            # (B, Nq, S, P+)
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    if attention_bias is not None:
        s = s + attention_bias.to(dev).float()[..., :s.shape[-1]]
    s = torch.where(keep, s, torch.full((), -math.inf, device=dev))
    m = s.amax(dim=-1, keepdim=True)
    sink = None
    if head_sink is not None:
        sink = head_sink.to(dev).float().reshape(1, -1, 1, 1)
    elif smooth_softmax:
        sink = torch.zeros((), device=dev)
    if sink is not None:
        m = torch.maximum(m, sink)
    e = torch.where(keep, torch.exp(s - m), torch.zeros((), device=dev))
    den = e.sum(dim=-1, keepdim=True) + (torch.exp(sink - m) if sink is not None else 0)
    y = torch.matmul(e / den, vv.float()).to(dt)
    return y.transpose(1, 2).reshape(batch, sq, num_heads * head), present_k, present_v
