"""frontend_torch: torch.compile(backend="tensorforge") and tfg.compile against eager PyTorch (the oracle).

Models: a small CNN (conv-bn-relu-pool-linear), a transformer block (linear, layer_norm, gelu, attention by
matmul/softmax and by scaled_dot_product_attention), a model with an op we do not convert (cumsum: a graph
break that must be reported and still run right), save → load in a fresh process without the model class,
and a deliberately broken converter (sub with swapped operands) that the comparison must catch.
"""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import tensorforge as tfg
import tensorforge.frontend_torch as ft
from tensorforge.frontend_torch import converters
from tensorforge.util.errors import UnsupportedOpError, UsageError

ROOT = Path(__file__).resolve().parents[2]
TOL = dict(rtol=1e-4, atol=1e-5)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.avg_pool2d(F.silu(self.bn2(self.conv2(x))), 2, stride=1)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x) - 0.5                      # sub with a scalar: the broken-converter test swaps it


class Block(nn.Module):
    """Pre-norm transformer block; attention written out (matmul, softmax) and, optionally, through sdpa."""

    def __init__(self, d=16, heads=2, sdpa=False):
        super().__init__()
        self.h, self.sdpa = heads, sdpa
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self._split(self.qkv(self.ln1(x)), b, t, d)
        if self.sdpa:
            a = F.scaled_dot_product_attention(q, k, v)
        else:
            a = torch.softmax(q @ k.transpose(-1, -2) / (d // self.h) ** 0.5, dim=-1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    def _split(self, qkv, b, t, d):
        qkv = qkv.view(b, t, 3 * self.h, d // self.h).transpose(1, 2)
        return qkv[:, :self.h], qkv[:, self.h:2 * self.h], qkv[:, 2 * self.h:]


class WithCumsum(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 4)

    def forward(self, x):
        return self.b(torch.tanh(torch.cumsum(F.relu(self.a(x)), dim=1)) * 2.0)


def _eval(m):
    torch.manual_seed(0)
    m = m.eval()
    for mod in m.modules():                      # non-trivial batch-norm statistics
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.5, 0.5), mod.running_var.uniform_(0.5, 2.0)
            mod.weight.data.uniform_(0.5, 1.5), mod.bias.data.uniform_(-0.3, 0.3)
    return m


def _dynamo(m, *x, **options):
    torch._dynamo.reset()
    out = torch.compile(m, backend="tensorforge", options=options or None)(*x)
    return out, ft.last_report()


@pytest.fixture(params=["cnn", "block", "block_sdpa"])
def model_and_input(request):
    torch.manual_seed(1)
    if request.param == "cnn":
        return _eval(SmallCNN()), torch.randn(2, 3, 16, 16)
    return _eval(Block(sdpa=request.param == "block_sdpa")), torch.randn(2, 5, 16)


def test_tfg_compile_matches_eager(model_and_input):
    m, x = model_and_input
    c = tfg.compile(m, (x,))
    assert isinstance(c, nn.Module) and c.graph_breaks == [] and c.report.engines == 1
    with torch.no_grad():
        torch.testing.assert_close(c(x), m(x), **TOL)
        x2 = torch.randn_like(x)                  # a second input: the engine is not a cached answer
        torch.testing.assert_close(c(x2), m(x2), **TOL)


def test_torch_compile_backend_matches_eager(model_and_input):
    m, x = model_and_input
    with torch.no_grad():
        out, report = _dynamo(m, x)
        torch.testing.assert_close(out, m(x), **TOL)
    assert report.breaks == [] and report.engines == 1 and report.converted_nodes > 5


def test_unconverted_op_is_a_reported_break_and_runs_right():
    m, x = _eval(WithCumsum()), torch.randn(3, 8)
    with torch.no_grad():
        out, report = _dynamo(m, x)
        torch.testing.assert_close(out, m(x), **TOL)
        c = tfg.compile(m, (x,))
        torch.testing.assert_close(c(x), m(x), **TOL)
    for rep in (report, c.report):
        assert [(op, "no converter" in why) for _, op, why in rep.breaks] == [("aten.cumsum.default", True)]
        assert rep.engines == 2                   # linear+relu before, tanh·2+linear after
    with pytest.raises(UsageError, match="graph breaks .*cumsum"):
        tfg.save(c, "unused")


def test_strict_conversion_names_every_unsupported_node():
    m, x = _eval(WithCumsum()), torch.randn(3, 8)
    ep = torch.export.export(m, (x,))
    with pytest.raises(UnsupportedOpError, match="cumsum.*no converter"):
        ft.fx_to_ir(ep.graph_module, {})


def test_training_batch_norm_is_refused_with_reason():
    m, x = SmallCNN().train(), torch.randn(2, 3, 16, 16)
    ep = torch.export.export(m, (x,))
    bn = next(n for n in ep.graph_module.graph.nodes if "batch_norm" in str(n.target))
    assert "training" in converters.unsupported_reason(bn)


def test_weights_are_shared_not_copied():
    m, x = _eval(SmallCNN()), torch.randn(1, 3, 16, 16)
    ep = torch.export.export(m, (x,))
    consts = {n: ep.state_dict[s.target] for n, s in zip(
        [p.name for p in ep.graph_module.graph.nodes if p.op == "placeholder"], ep.graph_signature.input_specs)
        if s.kind.name in ("PARAMETER", "BUFFER")}
    net = ft.fx_to_ir(ep.graph_module, consts).network
    ptrs = {t.untyped_storage().data_ptr() for t in net.constants.values()}
    assert m.conv1.weight.untyped_storage().data_ptr() in ptrs
    assert m.fc.weight.untyped_storage().data_ptr() in ptrs
    built = tfg.compile(m, (x,)).runner.engine.data.constants.values()   # CPU fp32: fc kept, convs BN-folded
    assert m.fc.weight.untyped_storage().data_ptr() in {t.untyped_storage().data_ptr() for t in built}


def test_scalar_operands_and_rsub():
    class Scalars(nn.Module):
        def forward(self, x, y):
            return torch.cat([1.0 - x, x / 3.0, (x - y) * 2.0, x.sigmoid() + y.tanh()], dim=1).permute(1, 0)
    m, x, y = Scalars(), torch.randn(4, 3), torch.randn(4, 3)
    c = tfg.compile(m, (x, y))
    torch.testing.assert_close(c(x, y), m(x, y), **TOL)


def test_broken_converter_is_caught(monkeypatch):
    """Swap sub's operands in the table: the comparison with eager must then fail (so it can fail)."""
    m, x = _eval(SmallCNN()), torch.randn(2, 3, 16, 16)
    monkeypatch.setitem(converters.TABLE, torch.ops.aten.sub.Tensor, converters._binary("Sub", swap=True))
    with torch.no_grad():
        c = tfg.compile(m, (x,))
        with pytest.raises(AssertionError):
            torch.testing.assert_close(c(x), m(x), **TOL)
        out, _ = _dynamo(m, x)
        with pytest.raises(AssertionError):
            torch.testing.assert_close(out, m(x), **TOL)


def test_save_then_load_in_a_fresh_process(tmp_path):
    m, x = _eval(Block()), torch.randn(2, 5, 16)
    c = tfg.compile(m, (x,))
    tfg.save(c, tmp_path / "saved")
    x2 = torch.randn(2, 5, 16)
    with torch.no_grad():
        torch.save({"x": x2, "y": m(x2)}, tmp_path / "io.pt")
    script = ("import sys, torch, tensorforge as tfg\n"
              "d = sys.argv[1]; io = torch.load(d + '/io.pt')\n"
              "mod = tfg.load_module(d + '/saved')\n"
              "assert 'Block' not in dir(sys.modules.get('__main__'))\n"
              "torch.testing.assert_close(mod(io['x']), io['y'], rtol=1e-4, atol=1e-5)\n"
              "print('LOADED OK', type(mod).__name__)\n")
    res = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True,
                         cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert res.returncode == 0 and "LOADED OK TensorforgeModule" in res.stdout, res.stderr[-2000:]


def test_load_module_rejects_a_foreign_folder(tmp_path):
    (tmp_path / "manifest.json").write_text('{"format": "other"}')
    with pytest.raises(tfg.TensorforgeError, match="not a tensorforge module manifest"):
        tfg.load_module(tmp_path)


def test_unknown_option_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown tensorforge option"):
        tfg.compile(nn.ReLU(), (torch.randn(2),), fp61=True)


def test_options_reach_the_backend():
    torch._dynamo.reset()
    with pytest.raises(Exception, match="unknown tensorforge option"):
        torch.compile(nn.Linear(2, 2), backend="tensorforge", options={"fp61": True})(torch.randn(1, 2))


def test_import_tensorforge_names_the_backend_without_loading_dynamo():
    script = ("import sys, tensorforge, torch\n"
              "assert 'torch._dynamo' not in sys.modules\n"
              "m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh()).eval(); x = torch.randn(2, 4)\n"
              "y = torch.compile(m, backend='tensorforge')(x)\n"
              "from tensorforge.frontend_torch import last_report\n"
              "assert last_report().engines == 1\n"
              "torch.testing.assert_close(y, m(x), rtol=1e-4, atol=1e-5)\n"
              "print('BACKEND OK')\n")
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "TRITON_INTERPRET": "1"})
    assert res.returncode == 0 and "BACKEND OK" in res.stdout, res.stderr[-2000:]


class Misc(nn.Module):
    """split/chunk/unbind with getitem, an RMSNorm (pow, mean, rsqrt), clamp, hardtanh, leaky_relu, casts,
    select, expand, sum, amax."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(12))

    def forward(self, x):                                 # x: (2, 3, 12)
        a, b = x.chunk(2, dim=-1)
        c, d, e = x.split([2, 4, 6], dim=2)
        rows = x.unbind(1)
        rms = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w
        y = torch.cat([a * b.clamp(-0.5, 0.7), F.hardtanh(c), F.leaky_relu(d, 0.2)], dim=-1)
        z = rows[0] + rows[2] + x.select(1, 1) + x.sum(1) - x.amax(dim=1)
        return y + rms, z + self.w[:1].expand(2, 12), e.half().float() * 3


def test_more_ops_match_eager():
    m, x = Misc(), torch.randn(2, 3, 12)
    c = tfg.compile(m, (x,))
    assert c.graph_breaks == [], c.graph_breaks
    with torch.no_grad():
        for got, want in zip(c(x), m(x)):
            torch.testing.assert_close(got, want, **TOL)


def test_dynamic_graph_gets_one_engine_for_its_shapes():
    """Dynamo makes the batch symbolic at the second shape; one engine with a profile then runs 3, 5 and 3 right
    (test_backend_engine.py checks the profile and its widening)."""
    torch._dynamo.reset()
    m = _eval(Block())
    f = torch.compile(m, backend="tensorforge")
    before = len(ft.reports())
    with torch.no_grad():
        for batch in (2, 3, 5, 3):
            x = torch.randn(batch, 5, 16)
            torch.testing.assert_close(f(x), m(x), **TOL)
    new = ft.reports()[before:]
    assert len(new) == 2 and all(r.engines == 1 and not r.breaks for r in new)    # shape 2, then 2..8 dynamic


def test_break_with_several_tensors_crossing_it():
    class Cross(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(6, 6)

        def forward(self, x):
            h = self.a(x)
            g, k = F.relu(h), torch.sigmoid(h)
            s = torch.cumsum(g, 1) + torch.cumsum(k, 1)          # two engines' outputs into PyTorch ops
            return torch.tanh(s) * g, k
    m, x = Cross(), torch.randn(3, 6)
    with torch.no_grad():
        out, report = _dynamo(m, x)
        for got, want in zip(out, m(x)):
            torch.testing.assert_close(got, want, **TOL)
    assert sorted(op for _, op, _ in report.breaks) == ["aten.cumsum.default"] * 2 and report.engines >= 2
