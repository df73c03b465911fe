"""Input-free subgraphs folded at conversion (fold.py) and scaled_dot_product_attention with masks, through
torch.compile(backend="tensorforge") and tfg.compile, against eager PyTorch (the oracle).

The models write their masks the way exported transformers do (positions from `arange`, `cumsum`/`ne`/`index` on
them, `new_ones`, a boolean mask built from sizes alone): before fold.py each of those nodes was a graph break
(GPT-2 of transformers 5: 20 breaks and 4 engines). A wrong causal mask must fail the comparison; a random op must
not be folded (its value changes per call); a runtime boolean mask takes the Where path.
"""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import tensorforge as tfg
import tensorforge.frontend_torch as ft
from tensorforge.frontend_torch import converters, fold

TOL = dict(rtol=1e-4, atol=1e-5)


class MaskedAttention(nn.Module):
    """One attention layer whose positions and boolean mask come from sizes alone (GPT-2's pattern: a position
    table read by arange, a padded-key mask from cumsum/ne, a causal lower triangle from two aranges)."""

    def __init__(self, d=16, heads=2, causal_flag=False, float_mask=False):
        super().__init__()
        self.h, self.causal_flag, self.float_mask = heads, causal_flag, float_mask
        self.pos = nn.Embedding(32, d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        pos = torch.arange(t, device=x.device)
        x = x + self.pos(pos)[None]
        q, k, v = self.qkv(x).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        if self.causal_flag:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            ones = x.new_ones((b, t), dtype=torch.long)
            seen = torch.cumsum(ones, dim=1).ne(0)                       # every key valid, computed anyway
            rows, cols = torch.arange(t, device=x.device), torch.arange(t, device=x.device)
            mask = (cols[None, :] <= rows[:, None])[None, None] & seen[:, None, None, :]
            if self.float_mask:
                mask = torch.zeros(mask.shape, dtype=x.dtype, device=x.device).masked_fill(~mask, -1e4)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(a.transpose(1, 2).reshape(b, t, d))


class RuntimeMask(nn.Module):
    def forward(self, q, k, v, keep):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)


class Noisy(nn.Module):
    def forward(self, x):
        return x + torch.rand(x.shape, device=x.device)


def _run_both(m, x):
    with torch.no_grad():
        want = m(x)
        torch._dynamo.reset()
        out = torch.compile(m, backend="tensorforge")(x)
        report = ft.last_report()
        c = tfg.compile(m, (x,))
        return want, out, report, c


@pytest.mark.parametrize("variant", ["bool_mask", "float_mask", "is_causal"])
def test_masked_attention_is_one_engine_and_matches_eager(variant):
    torch.manual_seed(0)
    m = MaskedAttention(causal_flag=variant == "is_causal", float_mask=variant == "float_mask").eval()
    x = torch.randn(2, 6, 16)
    want, out, report, c = _run_both(m, x)
    torch.testing.assert_close(out, want, **TOL)
    assert report.breaks == [] and report.engines == 1
    if variant != "is_causal":
        assert report.folded > 0                               # the mask and positions came from sizes alone
    with torch.no_grad():
        assert c.graph_breaks == []
        x2 = torch.randn(2, 6, 16)
        torch.testing.assert_close(c(x2), m(x2), **TOL)
    assert "Attention" in report.layer_ops()                  # the attention rule fused the written-out form


def test_a_causal_mask_that_sees_the_future_is_caught(monkeypatch):
    """The comparison can fail: the causal mask replaced by zeros (every key visible) must not match eager."""
    real = converters._additive_mask

    def leaky(ctx, node, mask, dtype):
        got = real(ctx, node, mask, dtype)
        if converters._arg(node, 5, "is_causal", False):
            lq, lk = ctx.static_dim(node.args[0], -2, "sdpa"), ctx.static_dim(node.args[1], -2, "sdpa")
            return ctx.const(torch.zeros(lq, lk, dtype=dtype), "no_mask")
        return got
    monkeypatch.setattr(converters, "_additive_mask", leaky)
    torch.manual_seed(0)
    m = MaskedAttention(causal_flag=True).eval()
    x = torch.randn(2, 6, 16)
    with torch.no_grad():
        c = tfg.compile(m, (x,))
        with pytest.raises(AssertionError):
            torch.testing.assert_close(c(x), m(x), **TOL)


def test_runtime_bool_mask_takes_the_where_path():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 2, 5, 8), torch.randn(2, 2, 7, 8), torch.randn(2, 2, 7, 8)
    keep = torch.rand(2, 1, 5, 7) > 0.3
    keep[..., 0] = True                                       # no fully masked row (torch gives NaN there)
    m = RuntimeMask()
    with torch.no_grad():
        c = tfg.compile(m, (q, k, v, keep))
        assert c.graph_breaks == []
        torch.testing.assert_close(c(q, k, v, keep), m(q, k, v, keep), **TOL)
        keep2 = torch.rand(2, 1, 5, 7) > 0.5
        keep2[..., 3] = True
        torch.testing.assert_close(c(q, k, v, keep2), m(q, k, v, keep2), **TOL)   # the mask is an input


def test_random_ops_are_not_folded():
    x = torch.zeros(4, 3)
    with torch.no_grad():
        c = tfg.compile(Noisy(), (x,))
        a, b = c(x), c(x)
    assert c.report.folded == 0 and not torch.equal(a, b)
    assert (a >= 0).all() and (a < 1).all()


def test_weights_are_not_folded_into_copies():
    """A large parameter read by an input-free node (here: a transpose of the weight alone) stays a parameter."""
    class WeightT(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(fold.SMALL + 1, 2))

        def forward(self, x):
            return x @ self.w.t()[:, :3]
    m, x = WeightT(), torch.randn(4, 2)
    with torch.no_grad():
        c = tfg.compile(m, (x,))
        assert c.report.folded == 0
        torch.testing.assert_close(c(x), m(x), **TOL)


def test_casts_written_with_a_device_convert():
    """x.to(device=x.device, dtype=…) exports as aten.to.device; transformers' masks on CUDA (torch 2.11) came as
    aten.to.dtype_layout: both are casts on the same device (a break in GPT-2 on the H200 at 1359748)."""
    class Casts(nn.Module):
        def forward(self, x):
            a = x.to(device=x.device, dtype=torch.float64)
            b = torch.ops.aten.to.dtype_layout(x * 3.0, dtype=torch.int32, layout=torch.strided, device=x.device)
            return a * 2.0, b
    x = torch.randn(3, 4) * 4.0
    with torch.no_grad():
        c = tfg.compile(Casts(), (x,))
        a, b = c(x)
    assert c.graph_breaks == []
    assert a.dtype == torch.float64 and b.dtype == torch.int32
    torch.testing.assert_close(a, x.double() * 2.0, rtol=0, atol=0)
    torch.testing.assert_close(b, (x * 3.0).to(torch.int32), rtol=0, atol=0)     # truncation toward zero


def test_split_is_one_split_layer_as_the_onnx_exporter_writes_it():
    """GPT-2's `c_attn(x).split(d, dim=2)`: one Split layer (three views), not three Slice layers — on the H200 at
    3948614 the Slices made the backend's GPT-2 engine 24 layers longer than the ONNX one."""
    class QKV(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(8, 24)

        def forward(self, x):
            q, k, v = self.c_attn(x).split(8, dim=2)
            a, b = torch.chunk(v, 2, dim=-1)
            return q * k + torch.cat([b, a], dim=-1)
    torch.manual_seed(0)
    m, x = QKV().eval(), torch.randn(2, 5, 8)
    with torch.no_grad():
        c = tfg.compile(m, (x,))
        torch.testing.assert_close(c(x), m(x), **TOL)
    ops = c.report.layer_ops()
    assert "Slice" not in ops and ops.get("Split") == 2, ops
