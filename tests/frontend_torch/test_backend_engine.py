"""torch.compile(backend="tensorforge"): the engine it builds, its per-call path, dynamic shapes, the entry point.

- The GPU smoke's two modules (bench/gpu_smoke/torch_compile_backend.py, at CPU sizes): the dynamo path's
  engine has the same fused layers (op, tactic, precision) and the same constant layouts as the ONNX path's
  engine of the same module (tfg.build through torch.onnx.export: the independent path), only the user input as
  engine input (weights are constants), and its outputs match eager PyTorch.
- Per call: with a CUDA-graph backend (the runtime tests' CPU fake) the first call captures and every later call
  is one replay without ExecutionContext.run; outputs are the caller's own (a later call does not overwrite them).
- Dynamic shapes: one engine with a profile over dynamo's range, reused; widened (one rebuild) when a call leaves
  it; declared min/max_shapes honoured.
- `[project.entry-points."torch_dynamo_backends"]` resolves backend="tensorforge" in a process that never
  imported tensorforge.
"""

import importlib.util
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

import pytest
import torch
import torch.nn as nn

import tensorforge as tfg
import tensorforge.frontend_torch as ft
from tensorforge.frontend_torch import runner as runner_mod
from tensorforge.runtime import ExecutionContext

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "runtime"))
from rt_fakes import FakeGraphBackend  # noqa: E402

_spec = importlib.util.spec_from_file_location("tcb_smoke", ROOT / "bench/gpu_smoke/torch_compile_backend.py")
smoke = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(smoke)

TOL = dict(rtol=1e-4, atol=1e-5)


def _modules():
    torch.manual_seed(0)
    return {"resnet_like": (smoke.ResNetLike().eval(), torch.randn(2, 3, 32, 32)),
            "bert_like": (smoke.BertLike(d=64, h=4).eval(), torch.randn(2, 8, 64))}


def _dynamo(m, x, **kw):
    torch._dynamo.reset()
    with torch.no_grad():
        y = torch.compile(m, backend="tensorforge", **kw)(x)
    return y, ft.last_report()


def _layers(engine):
    return Counter((layer.op, layer.tactic, layer.precision) for layer in engine.data.layers)


def _layouts(engine):
    return Counter((tuple(t.shape), t.stride(), t.dtype) for t in engine.data.constants.values())


@pytest.mark.parametrize("fp16", [False, True], ids=["fp32", "fp16"])
@pytest.mark.parametrize("name", ["resnet_like", "bert_like"])
def test_fx_engine_is_the_onnx_paths_engine(name, fp16):
    m, x = _modules()[name]
    y, report = _dynamo(m, x, options={"fp16": fp16}, dynamic=False)
    assert report.breaks == [] and len(report.built) == 1
    fx = report.built[0]
    onnx = tfg.build(m, example_inputs=(x,), fp16=fp16)
    assert _layers(fx) == _layers(onnx), (sorted(_layers(fx).items()), sorted(_layers(onnx).items()))
    assert len(fx.data.input_names) == 1                      # x only: parameters are constants, not inputs
    expected = {"resnet_like": {"FusedConv", "FusedConvPool", "Gemm"},     # post-norm: residual + LN fused
                "bert_like": {"Attention", "MatMulEpilogue", "AddLayerNormalization"}}[name]
    assert expected <= set(report.layer_ops())                # the fusions happened (conv+BN+ReLU, epilogues …)
    if fp16:    # the build copies weights anyway: the same layouts as the exporter's (fp32 keeps views of the module's)
        assert _layouts(fx) == _layouts(onnx)
    with torch.no_grad():
        ref = m(x)
    tol = dict(rtol=2e-2, atol=2e-2 * ref.abs().max().item()) if fp16 else TOL
    torch.testing.assert_close(y[0] if isinstance(y, tuple) else y, ref, **tol)


def test_params_passed_by_dynamo_become_constants_and_fold():
    """If dynamo's parameters stayed engine inputs, BatchNorm could not fold into the convolutions."""
    m, x = _modules()["resnet_like"]
    _, report = _dynamo(m, x, dynamic=False)
    ops = report.layer_ops()
    assert "BatchNormalization" not in ops and ops.get("FusedConv", 0) >= 6


@pytest.fixture
def fake_graphs(monkeypatch):
    backends = []

    def make(device):
        backends.append(FakeGraphBackend())
        return backends[-1]
    monkeypatch.setattr(runner_mod, "graph_backend", make)
    runs = []
    real_run = ExecutionContext.run
    monkeypatch.setattr(ExecutionContext, "run", lambda self, *a, **k: runs.append(1) or real_run(self, *a, **k))
    return backends, runs


def test_calls_replay_the_captured_graph_without_the_context_run(fake_graphs):
    backends, runs = fake_graphs
    m, _ = _modules()["bert_like"]
    torch._dynamo.reset()
    f = torch.compile(m, backend="tensorforge", dynamic=False)
    xs = [torch.randn(2, 8, 64) for _ in range(4)]
    with torch.no_grad():
        ys = [f(x) for x in xs]
        for x, y in zip(xs, ys):                 # each result still its own: not the graph's reused buffers
            torch.testing.assert_close(y, m(x), **TOL)
    (fake,) = backends
    assert (fake.captures, fake.replays) == (1, 4)
    assert len(runs) == 1                        # only the first call went through ExecutionContext.run (capture)


def test_without_graphs_every_call_runs_the_context():
    m, _ = _modules()["bert_like"]
    torch._dynamo.reset()
    f = torch.compile(m, backend="tensorforge", dynamic=False)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(2, 8, 64)
            torch.testing.assert_close(f(x), m(x), **TOL)
    engine = ft.last_report().built[0]
    assert engine.device.type == "cpu"


def _block():
    torch.manual_seed(3)
    return smoke.BertLike(d=32, h=2).eval()


def test_dynamic_batch_gets_one_engine_with_a_profile():
    m = _block()
    torch._dynamo.reset()
    f = torch.compile(m, backend="tensorforge")
    before = len(ft.reports())
    with torch.no_grad():
        for batch in (2, 3, 5, 8, 4, 3):
            x = torch.randn(batch, 6, 32)
            torch.testing.assert_close(f(x), m(x), **TOL)
    new = ft.reports()[before:]
    assert len(new) == 2                          # batch 2 (static, dynamo's first graph), then one dynamic engine
    assert new[1].layer_ops() == new[0].layer_ops() and "Attention" in new[1].layer_ops()   # same fusions
    assert len(new[1].built[0].data.input_names) == 1
    (profile,) = new[1].built[0].data.profiles
    ((mn, opt, mx),) = profile.values()
    assert (mn[0], opt[0], mx[0]) == (2, 3, 8) and mn[1:] == mx[1:] == (6, 32)   # min: dynamo's bound, max: 2·3 → 8
    with torch.no_grad():                         # outside the profile: rebuilt once, wider
        x = torch.randn(11, 6, 32)
        torch.testing.assert_close(f(x), m(x), **TOL)
        x = torch.randn(7, 6, 32)
        torch.testing.assert_close(f(x), m(x), **TOL)
    newer = ft.reports()[before + 2:]
    assert len(newer) == 1
    ((mn, _, mx),) = newer[0].built[0].data.profiles[0].values()     # one input: the weights stayed constants
    assert (mn[0], mx[0]) == (2, 16)


def test_declared_shapes_set_the_profile():
    m = _block()
    torch._dynamo.reset()
    f = torch.compile(m, backend="tensorforge",
                      options={"min_shapes": [(2, 4, 32)], "opt_shapes": [(8, 6, 32)], "max_shapes": [(32, 16, 32)]})
    x = torch.randn(4, 6, 32)
    torch._dynamo.mark_dynamic(x, 0)
    torch._dynamo.mark_dynamic(x, 1)
    before = len(ft.reports())
    with torch.no_grad():
        for b, t in ((4, 6), (32, 16), (2, 4), (17, 9)):
            xi = x if (b, t) == (4, 6) else torch.randn(b, t, 32)
            torch.testing.assert_close(f(xi), m(xi), **TOL)
    new = ft.reports()[before:]
    assert len(new) == 1
    ((mn, opt, mx),) = new[0].built[0].data.profiles[0].values()
    assert (mn, opt, mx) == ((2, 4, 32), (8, 6, 32), (32, 16, 32))


def test_bad_declared_shapes_are_a_usage_error():
    m = _block()
    torch._dynamo.reset()
    f = torch.compile(m, backend="tensorforge", options={"max_shapes": [(3, 6, 32)]})
    x = torch.randn(4, 6, 32)
    torch._dynamo.mark_dynamic(x, 0)
    with pytest.raises(Exception, match="do not nest"):
        f(x)


def test_entry_point_resolves_the_backend_by_name(tmp_path):
    """The package metadata setuptools writes from pyproject.toml (what `pip install`, editable or not, installs)
    lets dynamo find backend="tensorforge" in a process that never imported tensorforge."""
    eps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["torch_dynamo_backends"]
    assert eps == {"tensorforge": "tensorforge.frontend_torch.backend:tensorforge_backend"}
    src, meta = tmp_path / "src", tmp_path / "meta"
    (src / "tensorforge").mkdir(parents=True)
    meta.mkdir()
    for name in ("pyproject.toml", "README.md", "tensorforge/version.py"):
        (src / name).write_bytes((ROOT / name).read_bytes())
    (src / "tensorforge" / "__init__.py").write_text("")
    made = subprocess.run([sys.executable, "-c", "import sys; from setuptools import build_meta; "
                           "print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))", str(meta)],
                          cwd=src, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr[-2000:]
    dist = meta / made.stdout.split()[-1]
    assert "[torch_dynamo_backends]" in (dist / "entry_points.txt").read_text()
    script = ("import sys, torch\n"
              "assert 'tensorforge' in torch._dynamo.list_backends()\n"
              "assert not any(k.startswith('tensorforge') for k in sys.modules)\n"
              "m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval(); x = torch.randn(2, 4)\n"
              "with torch.no_grad():\n"
              "    y = torch.compile(m, backend='tensorforge')(x)\n"
              "    torch.testing.assert_close(y, m(x), rtol=1e-4, atol=1e-5)\n"
              "from tensorforge.frontend_torch import last_report\n"
              "assert last_report().engines == 1\n"
              "print('ENTRY POINT OK')\n")
    # that metadata first on the path (it shadows an older installed copy of the distribution), the checkout next
    env = {"PYTHONPATH": f"{meta}:{ROOT}", "PATH": "/usr/bin:/bin", "TRITON_INTERPRET": "1"}
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180, env=env,
                         cwd=tmp_path)
    assert res.returncode == 0 and "ENTRY POINT OK" in res.stdout, res.stderr[-2000:]


class SizeMath(nn.Module):
    """Sizes computed from the dynamic batch (b·t rows, a view back, unsqueeze + expand, squeeze)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)

    def forward(self, x):
        b, t, d = x.shape
        y = self.a(x.reshape(b * t, d)).view(b, t, d).flatten(0, 1)
        return torch.relu(y).unsqueeze(0).expand(2, b * t, d).unsqueeze(-1).squeeze(-1).squeeze(0)


def test_dynamic_sizes_computed_in_the_graph():
    m = SizeMath().eval()
    torch._dynamo.reset()
    f = torch.compile(m, backend="tensorforge")
    before = len(ft.reports())
    with torch.no_grad():
        for batch in (2, 3, 5, 4):
            x = torch.randn(batch, 5, 16)
            torch.testing.assert_close(f(x), m(x), **TOL)
    new = ft.reports()[before:]
    assert len(new) == 2 and not new[1].breaks and new[1].built[0].data.profiles[0]


def test_a_dynamic_graph_that_cannot_go_symbolic_falls_back_to_engines_per_shape(monkeypatch):
    from tensorforge.frontend_torch import dynamic

    def refuse(*a):
        raise RuntimeError("export refused (test)")
    monkeypatch.setattr(dynamic, "export_symbolic", refuse)
    m = _block()
    torch._dynamo.reset()
    f = torch.compile(m, backend="tensorforge")
    before = len(ft.reports())
    with torch.no_grad():
        for batch in (2, 3, 5, 3):
            x = torch.randn(batch, 6, 32)
            torch.testing.assert_close(f(x), m(x), **TOL)
    new = ft.reports()[before:]
    assert len(new) == 3 and all(len(r.built[0].data.input_names) == 1 for r in new)    # 2, 3, 5; weights constant


def test_a_plain_tensor_attribute_is_fed_not_baked_in():
    """Dynamo reuses the graph when `self.scale` is replaced by another tensor of the same shape, so the engine
    must read it at run time; parameters and registered buffers are constants."""
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.register_buffer("shift", torch.full((4,), 0.5))
            self.scale = torch.full((4,), 2.0)

        def forward(self, x):
            return self.lin(x) * self.scale + self.shift
    m = Scaled().eval()
    torch._dynamo.reset()
    f = torch.compile(m, backend="tensorforge", dynamic=False)
    x = torch.randn(3, 4)
    with torch.no_grad():
        torch.testing.assert_close(f(x), m(x), **TOL)
        m.scale = torch.full((4,), -3.0)
        torch.testing.assert_close(f(x), m(x), **TOL)
    assert len(ft.last_report().built[0].data.input_names) == 2        # x and scale; weight, bias, shift constant


def test_threads_get_their_own_contexts(fake_graphs):
    import threading
    backends, _ = fake_graphs
    m, _ = _modules()["bert_like"]
    _, report = _dynamo(m, torch.randn(2, 8, 64), dynamic=False)
    call = report.calls[0]
    results, contexts = {}, {}

    def work(k):
        torch.manual_seed(k)
        xs = [torch.randn(2, 8, 64) for _ in range(4)]
        with torch.no_grad():
            results[k] = [(x, call(*[x if n in call.feeds else None for n in call.arg_names])) for x in xs]
        contexts[k] = call.context()
    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with torch.no_grad():
        for k in range(2):
            for x, y in results[k]:
                torch.testing.assert_close(y[0], m(x), **TOL)
    assert contexts[0] is not contexts[1] and contexts[0].device_weights is contexts[1].device_weights


def test_mark_dynamic_bounds_become_the_profile():
    m = _block()
    torch._dynamo.reset()
    f = torch.compile(m, backend="tensorforge")
    x = torch.randn(4, 6, 32)
    torch._dynamo.mark_dynamic(x, 0, min=2, max=48)
    before = len(ft.reports())
    with torch.no_grad():
        for xi in (x, torch.randn(48, 6, 32), torch.randn(9, 6, 32)):
            torch.testing.assert_close(f(xi), m(xi), **TOL)
    (report,) = ft.reports()[before:]
    ((mn, opt, mx),) = report.built[0].data.profiles[0].values()
    assert (mn[0], opt[0], mx[0]) == (2, 4, 48)
