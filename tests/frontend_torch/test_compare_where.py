"""Comparisons, boolean logic, where and masked_fill through tfg.compile and torch.compile(backend="tensorforge"),
against eager PyTorch (the oracle): each was a graph break before (a mask built from the input, a clamp written as
where). A converter that swaps eq for ne must fail the comparison; operands of different dtypes stay a named break
(ONNX has no type promotion) and still run right."""

import pytest
import torch
import torch.nn as nn

import tensorforge as tfg
import tensorforge.frontend_torch as ft
from tensorforge.frontend_torch import converters, converters_more

TOL = dict(rtol=1e-5, atol=1e-6)


class Masks(nn.Module):
    def forward(self, x, y):
        pos, big = x > 0, x.abs() >= 1.0
        near = (x - y).abs() < 0.5
        keep = (pos & ~big) | (x == y) | (x.round() != 0)
        a = torch.where(keep, x, y * 2.0)
        b = torch.where(near, x, 0.25)
        c = (x * 3.0).masked_fill(pos.logical_and(big), -1.0)
        return a + b + c + (y <= 0.1).float() - near.logical_not().float()


def _inputs(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 6, generator=g) * 2.0
    y = torch.randn(4, 6, generator=g)
    y[0, :3] = x[0, :3]                           # some equal pairs: == and != matter
    return x, y


def test_masks_match_eager_with_no_break():
    m = Masks()
    x, y = _inputs(0)
    with torch.no_grad():
        c = tfg.compile(m, (x, y))
        assert c.graph_breaks == [] and c.report.engines == 1
        for seed in (0, 1, 2):
            xs, ys = _inputs(seed)
            torch.testing.assert_close(c(xs, ys), m(xs, ys), **TOL)
        torch._dynamo.reset()
        out = torch.compile(m, backend="tensorforge")(x, y)
        torch.testing.assert_close(out, m(x, y), **TOL)
    assert ft.last_report().breaks == []


def test_a_swapped_comparison_is_caught(monkeypatch):
    monkeypatch.setitem(converters.TABLE, torch.ops.aten.eq.Tensor, converters_more._compare("Equal", negate=True))
    m = Masks()
    x, y = _inputs(0)
    with torch.no_grad():
        c = tfg.compile(m, (x, y))
        with pytest.raises(AssertionError):
            torch.testing.assert_close(c(x, y), m(x, y), **TOL)


def test_mixed_dtypes_stay_a_named_break():
    class Mixed(nn.Module):
        def forward(self, x, n):
            return torch.where(x > n, x, 0.0) * 2.0
    x, n = torch.randn(3, 4), torch.tensor(0, dtype=torch.int64)
    with torch.no_grad():
        c = tfg.compile(Mixed(), (x, n))
        torch.testing.assert_close(c(x, n), Mixed()(x, n), **TOL)
    assert [op for _, op, _ in c.graph_breaks] == ["aten.gt.Tensor"]
    assert "different dtypes" in c.graph_breaks[0][2]


def test_unary_ops_match_eager_at_their_edges():
    """abs, round (half to even in both, at exact .5 values), floor, ceil, log, reciprocal."""
    class Unary(nn.Module):
        def forward(self, x):
            return torch.stack([x.abs(), x.round(), x.floor(), x.ceil(), x.abs().add(0.5).log(),
                                x.abs().add(0.25).reciprocal()])
    x = torch.tensor([[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5], [-1.2, 0.0, 0.7, 3.3, -4.8, 2.49]])
    with torch.no_grad():
        c = tfg.compile(Unary(), (x,))
        assert c.graph_breaks == []
        torch.testing.assert_close(c(x), Unary()(x), rtol=1e-6, atol=1e-7)


def test_integer_tensors_against_fractions_and_promoting_where_stay_breaks():
    """torch compares an int tensor with 0.5 in float and promotes where(c, int, 0.5) to float: converted as
    written (the scalar in the tensor's dtype) both would be wrong, so both stay named breaks and run right."""
    class Ints(nn.Module):
        def forward(self, n):
            return (n >= 0.5).float() + torch.where(n > 1, n, 0.5)
    n = torch.tensor([[0, 1, 2, -1]], dtype=torch.int64)
    with torch.no_grad():
        c = tfg.compile(Ints(), (n,))
        torch.testing.assert_close(c(n), Ints()(n), rtol=0, atol=0)
    reasons = " | ".join(why for _, _, why in c.graph_breaks)
    assert "fraction 0.5" in reasons and "promoting" in reasons, c.graph_breaks
