"""CUDA-graph logic of ExecutionContext behind a fake capture backend (CPU): one graph per input-shape signature,
static input/output buffers, invalidation and eviction, and the no-silent-fallback rule for uncapturable engines."""

import pytest
import torch

import tensorforge as tfg
from tensorforge.runtime import ExecutionContext
from tensorforge.util import log as tflog
from tensorforge.util.errors import UsageError

from rt_fakes import FakeGraphBackend
from rt_models import affine_relu, reference_affine_relu, reshape_by_shape, scale_by_width

SHAPES = {"x": ((1, 4), (2, 4), (8, 4))}


@pytest.fixture(scope="module")
def engine():
    """Level 0: one layer per ONNX node (no fusion), so a test can make one named layer refuse capture."""
    return tfg.build(affine_relu(), device="cpu", shapes=SHAPES, optimization_level=0).data


def make(engine, **kw):
    fake = FakeGraphBackend()
    return ExecutionContext(engine, "cpu", graph_backend=fake, **kw), fake


def test_one_capture_per_shape_signature_and_replays_read_new_inputs(engine):
    ctx, fake = make(engine)
    assert ctx.graphs_enabled
    for batch in (2, 2, 2, 5, 2, 5):
        x = torch.randn(batch, 4)
        y = ctx.run({"x": x})["y"]
        torch.testing.assert_close(y, reference_affine_relu(x))
    assert fake.captures == 2 and len(ctx.graph_cache) == 2       # batch 2 and batch 5
    assert fake.replays == 6                                       # every call replays, the first ones included
    assert fake.warmups == 2                                       # one warm-up per capture


def test_static_output_buffers_and_copies(engine):
    ctx, _ = make(engine)
    x1, x2 = torch.randn(3, 4), torch.randn(3, 4)
    a = ctx.run({"x": x1}, copy_outputs=False)["y"]
    b = ctx.run({"x": x2}, copy_outputs=False)["y"]
    assert a is b                                                  # the graph's static output, rewritten in place
    torch.testing.assert_close(b, reference_affine_relu(x2))
    c = ctx.run({"x": x1})["y"]                                    # default: a copy the next call cannot touch
    ctx.run({"x": x2})
    assert c.data_ptr() != b.data_ptr()
    torch.testing.assert_close(c, reference_affine_relu(x1))


def test_feeding_the_static_input_buffer_skips_the_copy(engine):
    ctx, _ = make(engine)
    ctx.run({"x": torch.zeros(4, 4)})
    entry = next(iter(ctx.graph_cache.graphs.values()))
    static = entry.static_inputs["x"]
    static.copy_(torch.arange(16.0).reshape(4, 4))
    y = ctx.run({"x": static})["y"]
    torch.testing.assert_close(y, reference_affine_relu(torch.arange(16.0).reshape(4, 4)))
    assert entry.static_inputs["x"] is static


def test_invalidate_and_lru_eviction(engine):
    ctx, fake = make(engine, max_graphs=2)
    for batch in (1, 2, 3):                                        # the third signature evicts batch 1
        ctx.run({"x": torch.randn(batch, 4)})
    assert fake.captures == 3 and len(ctx.graph_cache) == 2 and ctx.graph_cache.evictions == 1
    ctx.run({"x": torch.randn(3, 4)})
    assert fake.captures == 3                                      # still cached
    ctx.run({"x": torch.randn(1, 4)})
    assert fake.captures == 4                                      # evicted → captured again
    assert ctx.invalidate_graphs() == 2 and len(ctx.graph_cache) == 0
    x = torch.randn(3, 4)
    torch.testing.assert_close(ctx.run({"x": x})["y"], reference_affine_relu(x))
    assert fake.captures == 5


def test_shape_values_stay_on_the_host_and_host_data_is_copied_once_per_graph():
    # Reshape reads its shape (host shape arithmetic) as a value: handed over in place, nothing copied
    data = tfg.build(reshape_by_shape(), device="cpu", shapes={"x": ((1, 6), (2, 6), (4, 6))}, optimization_level=0).data
    placements = {layer.origin[0]: layer.placement for layer in data.layers}
    assert placements["n_shape"] == "host" and placements["n_reshape"] == "device"
    reshape = next(layer for layer in data.layers if layer.origin == ["n_reshape"])
    assert data.build_info["memory"]["host_value_inputs"] == {reshape.name: [1]}
    ctx, fake = make(data)
    for _ in range(3):
        x = torch.randn(3, 6)
        torch.testing.assert_close(ctx.run({"x": x})["y"], torch.relu(x) * 3)
    assert next(iter(ctx.graph_cache.graphs.values())).host_values == {}
    assert fake.captures == 1 and fake.replays == 3
    # Mul reads float(width) as data: copied to the device once per graph, at capture, never during replay
    data = tfg.build(scale_by_width(), device="cpu", shapes={"x": ((1, 6), (2, 6), (4, 6))}, optimization_level=0).data
    ctx, fake = make(data)
    for b in (3, 3, 2):
        x = torch.randn(b, 6)
        torch.testing.assert_close(ctx.run({"x": x})["y"], x * 6)
    cast = next(layer.outputs[0] for layer in data.layers if layer.origin == ["n_cast"])
    assert [list(e.host_values) for e in ctx.graph_cache.graphs.values()] == [[cast], [cast]]
    assert fake.captures == 2


def _refusing_context(engine, monkeypatch, origin, **kw):
    """A context whose layer from ONNX node `origin` fails under capture, as a host sync does on a real GPU."""
    from tensorforge.runtime import context as context_module
    fake = FakeGraphBackend()
    real = context_module.instantiate

    def instantiate(tactic_id, layer, device):
        inner = real(tactic_id, layer, device)
        if layer.origin != [origin]:
            return inner

        def kernel(inputs):
            if fake.capturing:
                raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
            return inner(inputs)
        return kernel
    monkeypatch.setattr(context_module, "instantiate", instantiate)
    ctx = ExecutionContext(engine, "cpu", graph_backend=fake, **kw)
    return ctx, fake, next(layer for layer in engine.layers if layer.origin == [origin])


def test_uncapturable_engine_runs_uncaptured_with_the_reason_logged(engine, capsys, monkeypatch):
    ctx, fake, layer = _refusing_context(engine, monkeypatch, "n_relu")
    monkeypatch.setattr(tflog.get_logger(), "min_severity", tflog.Severity.WARNING)
    x = torch.randn(2, 4)
    torch.testing.assert_close(ctx.run({"x": x})["y"], reference_affine_relu(x))
    err = capsys.readouterr().err
    assert "runs without CUDA graphs" in err and repr(layer.name) in err and "stream is capturing" in err
    assert not ctx.graphs_enabled and layer.name in ctx.graph_disabled_reason
    ctx.run({"x": torch.randn(2, 4)})
    assert fake.captures == 0 and fake.warmups == 1                # not attempted again


def test_uncapturable_engine_is_an_error_when_graphs_are_required(engine, monkeypatch):
    ctx, fake, layer = _refusing_context(engine, monkeypatch, "n_add", use_cuda_graph=True)
    with pytest.raises(UsageError, match=f"cannot run in a CUDA graph: layer '{layer.name}'"):
        ctx.run({"x": torch.randn(2, 4)})


def test_graph_switches(engine):
    with pytest.raises(UsageError, match="CUDA graphs need a CUDA device"):
        ExecutionContext(engine, "cpu", use_cuda_graph=True)
    plain = ExecutionContext(engine, "cpu")
    assert not plain.graphs_enabled and plain.graph_disabled_reason == "no CUDA graphs on cpu"
    off, fake = make(engine, use_cuda_graph=False)
    x = torch.randn(2, 4)
    torch.testing.assert_close(off.run({"x": x})["y"], reference_affine_relu(x))
    assert fake.captures == 0 and "--noCudaGraph" in off.graph_disabled_reason


def test_bind_inputs_returns_the_static_buffers(engine):
    ctx, fake = make(engine)
    x = torch.randn(2, 4)
    bound = ctx.bind_inputs({"x": x})
    torch.testing.assert_close(bound["x"], x)
    bound["x"].mul_(-1)                                            # the caller writes the next input in place
    y = ctx.run(bound, copy_outputs=False)["y"]
    torch.testing.assert_close(y, reference_affine_relu(-x))
    assert fake.captures == 1
    assert ExecutionContext(engine, "cpu").bind_inputs({"x": x}) is None     # uncaptured: nothing to bind
