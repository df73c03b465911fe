"""ExecutionContext's checks and messages (unchanged by graphs), TF32 control, and eager results vs onnxruntime."""

import numpy as np
import pytest
import torch

import tensorforge as tfg
from tensorforge.builder import tactics
from tensorforge.runtime import ExecutionContext, context
from tensorforge.util.errors import InputError, ShapeError

from oracle import ort_run
from rt_models import affine_relu

SHAPES = {"x": ((1, 4), (2, 4), (8, 4))}


@pytest.fixture(scope="module")
def engine():
    return tfg.build(affine_relu(), device="cpu", shapes=SHAPES, optimization_level=0).data


def test_eager_matches_onnxruntime(engine):
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    got = ExecutionContext(engine, "cpu").run({"x": torch.from_numpy(x)})["y"].numpy()
    np.testing.assert_allclose(got, ort_run(affine_relu(), {"x": x})["y"], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("feed,error,message", [
    ({}, InputError, "missing input 'x' (the engine's inputs are: x)"),
    ({"x": torch.zeros(2, 4), "z": torch.zeros(1)}, InputError, "unknown input 'z' (the engine's inputs are: x)"),
    ({"x": torch.zeros(2, 4, dtype=torch.int64)}, InputError,
     "input 'x' has dtype int64, the engine expects float32 (convert the input to the expected dtype)"),
    ({"x": torch.zeros(9, 4)}, ShapeError, "input 'x' shape 9x4 is outside profile 0 (min 1x4, max 8x4)"),
    ({"x": torch.zeros(2, 4, 1)}, ShapeError, "input 'x' has rank 3, the engine expects rank 2 (1x4)"),
])
def test_input_errors(engine, feed, error, message):
    with pytest.raises(error) as info:
        ExecutionContext(engine, "cpu").run(feed)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize("mode", [context.tf32_mode, tactics.tf32_mode])
def test_tf32_mode_sets_and_restores_both_flags(mode):
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    for enabled in (False, True):
        with mode(enabled):
            assert torch.backends.cuda.matmul.allow_tf32 is enabled and torch.backends.cudnn.allow_tf32 is enabled
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before


def test_no_tf32_is_recorded_in_the_engine_and_read_by_the_context(engine):
    strict = tfg.build(affine_relu(), device="cpu", shapes=SHAPES, tf32=False).data
    assert "noTF32" in strict.build_info["flags"] and not ExecutionContext(strict, "cpu").tf32
    assert "noTF32" not in engine.build_info["flags"] and ExecutionContext(engine, "cpu").tf32


def test_engine_built_for_cuda_runs_on_cpu_through_references(engine, capsys, monkeypatch):
    """An engine whose tactic cannot run here (e.g. a channels-last cuDNN conv on the CPU) still runs, and says why."""
    import copy

    from tensorforge.kernels import registry
    from tensorforge.kernels.registry import Tactic
    from tensorforge.util import log as tflog
    from rt_models import reference_affine_relu
    data = copy.deepcopy(engine)
    relu = next(layer for layer in data.layers if layer.op == "Relu")
    relu.tactic = "relu.cuda_only_for_test"
    only_cuda = Tactic("Relu", "cuda_only_for_test", lambda l, d: None if d.type == "cuda" else "needs CUDA",
                       lambda l, c, d: None, [{}], 0)
    monkeypatch.setitem(registry._TACTICS, "Relu", registry._TACTICS.get("Relu", []) + [only_cuda])
    monkeypatch.setattr(tflog.get_logger(), "min_severity", tflog.Severity.WARNING)
    ctx = ExecutionContext(data, "cpu")
    assert list(ctx.substituted) == [relu.name] and "needs CUDA" in ctx.substituted[relu.name]
    assert "run their torch reference instead" in capsys.readouterr().err
    x = torch.randn(3, 4)
    torch.testing.assert_close(ctx.run({"x": x})["y"], reference_affine_relu(x))


def test_host_values_reach_device_layers_and_outputs():
    """Shape arithmetic runs on the host; a device layer reading it and a network output made of it both get it."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Shape", ["x"], ["s"], name="n_shape"),
             helper.make_node("Reshape", ["x", "s"], ["r"], name="n_reshape"),
             helper.make_node("Relu", ["r"], ["y"], name="n_relu")]
    graph = helper.make_graph(nodes, "host_out", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("s", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    data = tfg.build(model.SerializeToString(), device="cpu", shapes={"x": ((1, 3), (2, 3), (5, 3))},
                     optimization_level=0).data
    assert {layer.op: layer.placement for layer in data.layers}["Shape"] == "host"
    ctx = ExecutionContext(data, "cpu")
    for b in (1, 4):
        x = torch.randn(b, 3)
        out = ctx.run({"x": x})
        torch.testing.assert_close(out["y"], torch.relu(x))
        assert out["s"].tolist() == [b, 3] and out["s"].dtype == torch.int64
