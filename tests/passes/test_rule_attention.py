"""Attention rule: BERT-style, SDPA-exported and GPT-2-style causal attention become one Attention layer."""

import math

import numpy as np
import pytest
import torch
import torch.nn as nn

from fusion_helpers import check_fused, export_quiet, feeds_for, ops


class SelfAttention(nn.Module):
    """Head split → q·kᵀ/√d (+ mask) → softmax → ·v → head merge; `sdpa` uses F.scaled_dot_product_attention,
    `causal` builds GPT-2's Where(tril, scores, −big) from a buffer."""

    def __init__(self, heads=2, d=8, sdpa=False, causal=False, scale_mul=False):
        super().__init__()
        self.h, self.d, self.sdpa, self.causal, self.scale_mul = heads, d, sdpa, causal, scale_mul
        self.qkv = nn.Linear(heads * d, 3 * heads * d)
        self.register_buffer("tril", torch.tril(torch.ones(16, 16, dtype=torch.bool)))

    def forward(self, x, mask):
        b, t, _ = x.shape
        q, k, v = (z.reshape(b, t, self.h, self.d).permute(0, 2, 1, 3) for z in self.qkv(x).chunk(3, -1))
        if self.sdpa:
            o = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        else:
            s = torch.matmul(q, k.transpose(-1, -2))
            s = s * (1 / math.sqrt(self.d)) if self.scale_mul else s / math.sqrt(self.d)
            if self.causal:
                s = torch.where(self.tril[:t, :t], s, torch.tensor(-1e9))
            o = torch.matmul(torch.softmax(s + mask, -1), v)
        return o.permute(0, 2, 1, 3).reshape(b, t, self.h * self.d)


def _inputs(t=5):
    x = torch.randn(2, t, 16)
    mask = torch.zeros(2, 1, 1, t)
    mask[0, ..., -2:] = -1e4
    return x, mask


@pytest.mark.parametrize("module,dynamo,opset", [
    (SelfAttention(), False, 11),
    (SelfAttention(scale_mul=True), False, 17),
    (SelfAttention(), True, 18),
    (SelfAttention(sdpa=True), False, 17),
    (SelfAttention(sdpa=True), True, 18),
    (SelfAttention(causal=True), False, 17),
])
def test_attention_forms_fuse(module, dynamo, opset):
    x, mask = _inputs()
    model = export_quiet(module, (x, mask), opset=opset, dynamo=dynamo)
    engine, _ = check_fused(model, feeds_for(model, x.numpy(), mask.numpy()))
    found = ops(engine)
    assert found.count("Attention") == 1 and "Softmax" not in found
    att = next(layer for layer in engine.data.layers if layer.op == "Attention")
    assert att.attrs["scale"] == pytest.approx(1 / math.sqrt(8), rel=1e-6)


def test_softmax_over_the_query_axis_is_rejected():
    class Wrong(nn.Module):
        def forward(self, q, k, v):
            return torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / 3.0, -2), v)
    q, k, v = torch.randn(2, 4, 8), torch.randn(2, 4, 8), torch.randn(2, 4, 8)
    model = export_quiet(Wrong(), (q, k, v), opset=17)
    engine, log = check_fused(model, feeds_for(model, q.numpy(), k.numpy(), v.numpy()))
    assert "Attention" not in ops(engine)
    assert "the softmax runs over axis -2, not the last (key) axis" in log


def test_scores_read_elsewhere_are_rejected():
    class Leaky(nn.Module):
        def forward(self, q, k, v):
            s = torch.matmul(q, k.transpose(-1, -2))
            return torch.matmul(torch.softmax(s, -1), v), s.sum()
    q, k, v = torch.randn(2, 4, 8), torch.randn(2, 4, 8), torch.randn(2, 4, 8)
    model = export_quiet(Leaky(), (q, k, v), opset=17)
    engine, log = check_fused(model, feeds_for(model, q.numpy(), k.numpy(), v.numpy()))
    assert "Attention" not in ops(engine)
    assert "is also read by layer" in log


def test_where_that_is_not_a_mask_is_rejected():
    class NotMask(nn.Module):
        def forward(self, q, k, v, c):
            s = torch.where(c, torch.matmul(q, k.transpose(-1, -2)), torch.tensor(0.5))
            return torch.matmul(torch.softmax(s, -1), v)
    q, k, v = torch.randn(1, 4, 8), torch.randn(1, 4, 8), torch.randn(1, 4, 8)
    c = torch.rand(1, 4, 4) > 0.5
    model = export_quiet(NotMask(), (q, k, v, c), opset=17)
    engine, log = check_fused(model, feeds_for(model, q.numpy(), k.numpy(), v.numpy(), np.asarray(c)))
    assert "Attention" not in ops(engine)
    assert "Where fills 0.5, not a large negative value" in log


class SDPABoolMask(nn.Module):
    def forward(self, q, k, v, keep):
        return nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)


@pytest.mark.parametrize("dynamo,opset", [(False, 17), (True, 18)])
def test_sdpa_bool_mask_with_the_nan_guard(dynamo, opset):
    """SDPA exports a bool mask as Where(m, 0, −inf) and guards the softmax with Where(IsNaN(P), 0, P):
    a query that may see no key gets 0."""
    q, k, v = torch.randn(1, 2, 4, 8), torch.randn(1, 2, 6, 8), torch.randn(1, 2, 6, 8)
    keep = torch.rand(1, 1, 4, 6) > 0.4
    keep[..., 0, :] = False                       # the first query sees nothing
    keep[..., 1:, 0] = True
    model = export_quiet(SDPABoolMask(), (q, k, v, keep), opset=opset, dynamo=dynamo)
    feeds = feeds_for(model, q.numpy(), k.numpy(), v.numpy(), keep.numpy())
    engine, _ = check_fused(model, feeds)
    att = [layer for layer in engine.data.layers if layer.op == "Attention"]
    assert len(att) == 1 and att[0].attrs["nan_to_zero"] == 1 and "Softmax" not in ops(engine)
    out = engine.run(feeds)[engine.output_names[0]]
    assert np.isfinite(out).all()
    if not dynamo:       # legacy fills with −inf (the guard zeroes the row); dynamo fills with the float minimum
        assert np.all(out[:, :, 0] == 0)


def test_noop_cast_between_softmax_and_matmul_is_removed():
    """GPT-2's eager attention casts the probabilities to v's dtype (a no-op in float32)."""
    class CastProbs(nn.Module):
        def forward(self, q, k, v):
            p = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / 4.0, -1)
            return torch.matmul(p.type(v.dtype), v)
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8)
    model = export_quiet(CastProbs(), (q, k, v), opset=17)
    assert "Cast" in [n.op_type for n in __import__("onnx").load_from_string(model).graph.node]
    engine, _ = check_fused(model, feeds_for(model, q.numpy(), k.numpy(), v.numpy()))
    assert "Attention" in ops(engine) and "Cast" not in ops(engine)
    assert engine.data.build_info["passes"]["no-ops"] == 1
