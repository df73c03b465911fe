"""IR op "OnnxAttention": ONNX Attention (opsets 23–25) — SDPA with masks, KV cache, GQA, softcap, windows.

Also FlexAttention (ai.onnx.preview): SDPA with score/probability modifier sub-networks.
(Not named "Attention": that name is the fused op of ir/ops/fused.py, whose causal mask is bottom-right
aligned for every Sq ≠ Skv, while ONNX aligns it by the cache offset. Unifying the two is open work.)

    Q (B, Hq, Sq, D)  K (B, Hkv, Skv, D)  V (B, Hkv, Skv, Dv)     (3-D inputs: (B, S, H·D), split by q/kv_num_heads)
    K ← concat(past_key, K), V ← concat(past_value, V)           (present_key / present_value outputs)
    s = (Q·√scale)(K·√scale)ᵀ,  scale = 1/√D by default;  s ← c·tanh(s/c) when softcap c > 0
    bias = attn_mask (bool → 0/-inf, padded with -inf up to Skv) + causal (j ≤ i + offset) + window + padding
    Y = softmax(s + bias) V   (KV heads repeated Hq/Hkv times, interleaved: GQA/MQA); fully-masked rows → 0

`offset` = past length, or nonpad_kv_seqlen[b] - Sq for an external cache. The optional 4th output is the
score matrix at a stage chosen by qk_matmul_output_mode (0/1: after softcap, 2: + bias, 3: softmax).
Traffic: reads Q, K, V once and writes Y; the (B, H, Sq, Skv) scores are materialised by this reference
(a fused tactic streams them instead).
"""

import math

import torch

from ..dtypes import dtype_from_name
from ..opspec import op
from .control import run_network

_ATTRS = {"scale": None, "is_causal": 0, "q_num_heads": None, "kv_num_heads": None, "softcap": 0.0,
          "softmax_precision": None, "qk_matmul_output_mode": 0, "left_window_size": -1, "right_window_size": -1}


def _heads(x, n):
    """(B, S, n·d) → (B, n, S, d)."""
    b, s, hidden = x.shape
    return x.reshape(b, s, n, hidden // n).transpose(1, 2)


def _neg_inf_where(allowed, like):
    return torch.where(allowed, torch.zeros((), dtype=like.dtype, device=like.device),
                       torch.full((), -math.inf, dtype=like.dtype, device=like.device))


def _position_bias(sq, skv, offset, allowed_fn, like):
    """Additive 0/-inf bias from a rule on (query i, key j, offset): (Sq, Skv), or (B, 1, Sq, Skv) when
    `offset` is per batch (a 1-D tensor)."""
    i = torch.arange(sq, device=like.device).reshape(sq, 1)
    j = torch.arange(skv, device=like.device).reshape(1, skv)
    if isinstance(offset, torch.Tensor):
        allowed = allowed_fn(i + offset.to(like.device).reshape(-1, 1, 1), j).unsqueeze(1)
    else:
        allowed = allowed_fn(i + offset, j)
    return _neg_inf_where(allowed, like)


@op("OnnxAttention", attrs=dict(_ATTRS))
def attention(q, k, v, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None, *, scale=None,
              is_causal=0, q_num_heads=None, kv_num_heads=None, softcap=0.0, softmax_precision=None,
              qk_matmul_output_mode=0, left_window_size=-1, right_window_size=-1):
    """Returns (Y, present_key, present_value, qk_matmul_output)."""
    three_d = q.dim() == 3
    if three_d:
        q, k, v = _heads(q, q_num_heads), _heads(k, kv_num_heads), _heads(v, kv_num_heads)
    if (past_key is None) != (past_value is None):
        raise ValueError("past_key and past_value must be given together")
    if past_key is not None:
        k, v = torch.cat([past_key, k], dim=2), torch.cat([past_value, v], dim=2)
    present_key, present_value = k, v
    batch, hq, sq, head = q.shape
    skv = k.shape[2]
    dt = q.dtype

    bias = torch.zeros((sq, skv), dtype=dt, device=q.device)
    if attn_mask is not None:
        mask = attn_mask.to(q.device)
        if mask.shape[-1] < skv:
            fill = False if mask.dtype == torch.bool else -math.inf
            pad = torch.full((*mask.shape[:-1], skv - mask.shape[-1]), fill, dtype=mask.dtype, device=q.device)
            mask = torch.cat([mask, pad], dim=-1)
        bias = bias + (_neg_inf_where(mask, bias) if mask.dtype == torch.bool else mask.to(dt))
    external = past_key is None and nonpad_kv_seqlen is not None
    offset = (nonpad_kv_seqlen.reshape(-1) - sq) if external else (past_key.shape[2] if past_key is not None else 0)
    if is_causal:
        bias = bias + _position_bias(sq, skv, offset, lambda p, j: j <= p, bias)
    if left_window_size >= 0 or right_window_size >= 0:
        def window(p, j):
            ok = torch.ones_like(p - j, dtype=torch.bool)
            if left_window_size >= 0:
                ok = ok & (p - j <= left_window_size)
            if right_window_size >= 0:
                ok = ok & (j - p <= right_window_size)
            return ok
        bias = bias + _position_bias(sq, skv, offset, window, bias)
    if nonpad_kv_seqlen is not None:
        valid = torch.arange(skv, device=q.device).reshape(1, skv) < nonpad_kv_seqlen.to(q.device).reshape(-1, 1)
        bias = bias + _neg_inf_where(valid, bias).reshape(batch, 1, 1, skv)

    hk = k.shape[1]
    if hq != hk and hq % hk == 0:
        k, v = k.repeat_interleave(hq // hk, dim=1), v.repeat_interleave(hq // hk, dim=1)

    root = torch.tensor(math.sqrt(scale if scale is not None else 1.0 / math.sqrt(head)), dtype=dt)
    scores = torch.matmul(q * root.to(q.device), (k * root.to(q.device)).transpose(-1, -2))
    if softcap and softcap > 0:
        scores = torch.tanh(scores / softcap) * softcap
    with_bias = scores + bias
    debug = with_bias if qk_matmul_output_mode == 2 else scores
    work = with_bias.to(dtype_from_name(softmax_precision)) if softmax_precision else with_bias
    row_max = work.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isneginf(row_max), torch.zeros_like(row_max), row_max)
    e = torch.exp(work - row_max)
    total = e.sum(dim=-1, keepdim=True)
    probs = e / torch.where(total == 0, torch.ones_like(total), total)
    masked_row = torch.isneginf(bias.amax(dim=-1, keepdim=True))
    probs = torch.where(masked_row, torch.zeros_like(probs), probs).to(dt)
    if qk_matmul_output_mode == 3:
        debug = probs
    y = torch.matmul(probs, v)
    if three_d:
        y = y.transpose(1, 2).reshape(batch, sq, -1)
    return y, present_key, present_value, debug.to(dt)


@op("FlexAttention", attrs={"scale": None, "softmax_precision": None, "score_mod": None, "prob_mod": None,
                            "num_score_captured": 0})
def flex_attention(q, k, v, *captured, scale=None, softmax_precision=None, score_mod=None, prob_mod=None,
                   num_score_captured=0):
    """ai.onnx.preview FlexAttention: s = (Q·√scale)(K·√scale)ᵀ in the softmax precision (float32 unless
    the inputs are float64), s ← score_mod(s), p = softmax(s), p ← prob_mod(p), Y = p·V; the modifiers are
    sub-networks (ir/ops/control.py conventions: their captured outer tensors trail Q, K, V)."""
    hq, hkv = q.shape[1], k.shape[1]
    if hq != hkv:
        k, v = k.repeat_interleave(hq // hkv, dim=1), v.repeat_interleave(hq // hkv, dim=1)
    s = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    root = torch.full((), math.sqrt(s), dtype=torch.float32).to(q.dtype).item()   # √scale in Q's dtype, on the host
    work = dtype_from_name(softmax_precision) if softmax_precision else (
        q.dtype if q.dtype == torch.float64 else torch.float32)
    scores = torch.matmul(q * root, (k * root).transpose(-1, -2)).to(work)
    if score_mod is not None:
        scores = run_network(score_mod, [scores, *captured[:num_score_captured]])[0].to(work)
    probs = torch.softmax(scores, dim=-1)
    if prob_mod is not None:
        probs = run_network(prob_mod, [probs, *captured[num_score_captured:]])[0].to(work)
    return torch.matmul(probs, v.to(work)).to(v.dtype)
