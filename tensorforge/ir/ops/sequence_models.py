"""Ops of recent sequence models: RotaryEmbedding (23), LinearAttention (27), CausalConvWithState (27).

RotaryEmbedding: for each head vector x = [x1 | x2] (halves, or even/odd entries when interleaved) of its
first rotary_embedding_dim entries, y = [x1·cos − x2·sin | x1·sin + x2·cos] with cos/sin looked up by
position_ids (or given per token). One read and one write of X.

LinearAttention keeps a state S (B, Hkv, dk, dv) in float32 and runs, per token t:
    linear S += kₜ⊗vₜ;  gated S = e^{gₜ}·S + kₜ⊗vₜ;  delta S += βₜ kₜ⊗(vₜ − Sᵀkₜ);
    gated_delta S = e^{gₜ}·S + βₜ kₜ⊗(vₜ − e^{gₜ}·Sᵀkₜ);   oₜ = scale · qₜᵀ S   (GQA: query head h reads S[h // (Hq/Hkv)])
Traffic: Q, K, V read once, the state updated T times (dk·dv per head per token).

CausalConvWithState: y = act(depthwise_conv1d(concat(past_state, x), w) + b), present = last k−1 columns
of the concatenation (act: none, or SiLU/swish computed in float32).
"""

import math

import torch
import torch.nn.functional as F

from ..opspec import op


@op("RotaryEmbedding", attrs={"interleaved": 0, "rotary_embedding_dim": 0, "num_heads": 0})
def rotary_embedding(x, cos_cache, sin_cache, position_ids=None, *, interleaved=0, rotary_embedding_dim=0,
                     num_heads=0):
    shape = x.shape
    if x.dim() == 4:                                   # (B, H, S, D) → (B, S, H, D)
        x = x.transpose(1, 2)
    else:                                              # (B, S, H·D) → (B, S, H, D)
        x = x.reshape(shape[0], shape[1], num_heads, shape[2] // num_heads)
    dim = rotary_embedding_dim or x.shape[-1]
    rot, keep = x[..., :dim], x[..., dim:]
    if position_ids is not None:
        pos = position_ids.to(x.device).long()
        cos_cache, sin_cache = cos_cache.to(x.device)[pos], sin_cache.to(x.device)[pos]
    cos, sin = cos_cache.to(x.device).unsqueeze(2), sin_cache.to(x.device).unsqueeze(2)
    if interleaved:
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
    else:
        x1, x2 = rot.chunk(2, dim=-1)
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    rot = torch.stack([real, imag], dim=-1).reshape(rot.shape) if interleaved else torch.cat([real, imag], dim=-1)
    y = torch.cat([rot, keep], dim=-1).to(x.dtype)
    return y.reshape(shape) if len(shape) == 3 else y.transpose(1, 2)


def _heads(x, n):
    b, t, hd = x.shape
    return x.reshape(b, t, n, hd // n).transpose(1, 2)


@op("LinearAttention", attrs={"q_num_heads": None, "kv_num_heads": None, "scale": 0.0,
                              "update_rule": "gated_delta", "chunk_size": 64})
def linear_attention(query, key, value, past_state=None, decay=None, beta=None, *, q_num_heads=None,
                     kv_num_heads=None, scale=0.0, update_rule="gated_delta", chunk_size=64):
    """Returns (output (B, T, Hq·dv), present_state (B, Hkv, dk, dv)). chunk_size is a tuning hint only."""
    gated, delta = update_rule in ("gated", "gated_delta"), update_rule in ("delta", "gated_delta")
    if update_rule not in ("linear", "gated", "delta", "gated_delta"):
        raise ValueError(f"unknown LinearAttention update_rule {update_rule!r}")
    b, t, _ = query.shape
    q = _heads(query, q_num_heads).float()
    k, v = _heads(key, kv_num_heads).float(), _heads(value, kv_num_heads).float()
    dk, dv = q.shape[-1], v.shape[-1]
    group = q_num_heads // kv_num_heads
    if gated:
        g = decay.reshape(b, t, kv_num_heads, -1).transpose(1, 2).float()      # (B, Hkv, T, 1 or dk)
    if delta:
        bt = beta.reshape(b, t, beta.shape[-1], 1).transpose(1, 2).float()      # (B, Hkv or 1, T, 1)
    state_dtype = past_state.dtype if past_state is not None else query.dtype
    state = (past_state.float().clone() if past_state is not None
             else torch.zeros(b, kv_num_heads, dk, dv, device=query.device))
    s = scale if scale else 1.0 / math.sqrt(dk)
    outs = []
    for i in range(t):
        kt, vt = k[:, :, i], v[:, :, i]
        if gated:
            state = state * torch.exp(g[:, :, i]).unsqueeze(-1)
        if delta:
            vt = bt[:, :, i] * (vt - torch.einsum("bhdm,bhd->bhm", state, kt))
        state = state + kt.unsqueeze(-1) * vt.unsqueeze(-2)
        read = state.repeat_interleave(group, dim=1) if group > 1 else state
        outs.append(s * torch.einsum("bhd,bhdm->bhm", q[:, :, i], read))
    out = torch.stack(outs, dim=2) if outs else torch.zeros(b, q_num_heads, 0, dv, device=query.device)
    return out.transpose(1, 2).reshape(b, t, q_num_heads * dv).to(query.dtype), state.to(state_dtype)


@op("CausalConvWithState", attrs={"activation": "none"})
def causal_conv_with_state(x, weight, bias=None, past_state=None, *, activation="none"):
    """Returns (output (B, C, L), present_state (B, C, k−1))."""
    batch, channels, _ = x.shape
    k = weight.shape[2]
    pad = past_state if past_state is not None else torch.zeros(batch, channels, k - 1, dtype=x.dtype, device=x.device)
    padded = torch.cat([pad.to(x.device), x], dim=2)
    y = F.conv1d(padded, weight, bias, groups=channels)
    if activation in ("silu", "swish"):
        y = F.silu(y.float()).to(x.dtype)
    elif activation != "none":
        raise ValueError(f"unknown CausalConvWithState activation {activation!r}")
    return y, padded[:, :, padded.shape[2] - (k - 1):]
