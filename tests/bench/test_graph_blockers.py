"""ExecutionContext.graph_blockers (read-only): the layer whose capture failed, with its op and tactic, and the
bench's CUDA-graph column built from it (bench/zoo_case.graph_columns). Uses the runtime tests' fake capture
backend on the CPU, with one layer that fails under capture as a host sync does on a GPU."""

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "runtime"))
sys.path.insert(0, str(ROOT / "bench"))

import tensorforge as tfg  # noqa: E402
from tensorforge.runtime import ExecutionContext  # noqa: E402

from rt_fakes import FakeGraphBackend  # noqa: E402
from rt_models import affine_relu, reference_affine_relu  # noqa: E402

zoo_case = pytest.importorskip("zoo_case")
report = pytest.importorskip("report")


@pytest.fixture(scope="module")
def engine():
    return tfg.build(affine_relu(), device="cpu", shapes={"x": ((1, 4), (2, 4), (8, 4))}, optimization_level=0).data


def _context(engine, monkeypatch, origin):
    from tensorforge.runtime import context as context_module
    fake = FakeGraphBackend()
    real = context_module.instantiate

    def instantiate(tactic_id, layer, device):
        inner = real(tactic_id, layer, device)
        if layer.origin != [origin]:
            return inner

        def kernel(inputs):
            if fake.capturing:
                raise RuntimeError("operation not permitted when stream is capturing")
            return inner(inputs)
        return kernel
    monkeypatch.setattr(context_module, "instantiate", instantiate)
    return ExecutionContext(engine, "cpu", graph_backend=fake)


def test_the_blocking_layer_is_recorded_and_reported(engine, monkeypatch):
    ctx = _context(engine, monkeypatch, "n_relu")
    layer = next(layer for layer in engine.layers if layer.origin == ["n_relu"])
    assert ctx.graph_blockers == [] and ctx.graphs_enabled
    x = torch.randn(2, 4)
    torch.testing.assert_close(ctx.run({"x": x})["y"], reference_affine_relu(x))
    assert ctx.graph_blockers == [{"layer": layer.name, "op": layer.op, "tactic": layer.tactic}]
    cols = zoo_case.graph_columns(ctx)
    assert cols["graphs"] is False and cols["graph_blockers"] == [layer.name] and cols["graph_blocker_count"] == 1
    assert report._graph_cell(cols) == f"no (1: {layer.name})"


def test_a_capturable_engine_has_no_blockers(engine):
    ctx = ExecutionContext(engine, "cpu", graph_backend=FakeGraphBackend())
    ctx.run({"x": torch.randn(2, 4)})
    cols = zoo_case.graph_columns(ctx)
    assert cols["graphs"] is True and cols["graph_blockers"] == [] and report._graph_cell(cols) == "yes"
