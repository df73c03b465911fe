"""A script written in TensorRT's Python idiom, with `import tensorrt as trt` replaced by `import tensorforge as trt`.

It parses an ONNX model exported from torch, builds with an optimization profile and a timing cache, saves and
deserializes the plan, sets input shapes and addresses, executes, and must match onnxruntime at two batch sizes.
Further tests cover the parts of the API such scripts touch: execute_v2, tensors as addresses, parser errors,
refused builder flags, engine queries.
"""

import numpy as np
import pytest
import torch
import torch.nn as nn
from onnx import TensorProto, helper

import tensorforge as trt
from oracle import export, ort_run
from tensorforge.util.errors import ShapeError, TensorforgeError, UsageError

LOGGER = trt.Logger(trt.Logger.INTERNAL_ERROR)   # the parser logs its errors; keep test output quiet

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        return torch.softmax(self.fc(y.mean(dim=(2, 3))), dim=-1)


@pytest.fixture(scope="module")
def model_bytes():
    torch.manual_seed(0)
    return export(Net(), (torch.randn(2, 3, 8, 8),), opset=17, input_names=["images"], output_names=["scores"],
                  dynamic_axes={"images": {0: "batch"}, "scores": {0: "batch"}})


def tensorrt_style_build(model_bytes, tmp_path):
    """What a TensorRT user writes, line for line (TensorRT 10 API)."""
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
    parser = trt.OnnxParser(network, logger)
    path = tmp_path / "model.onnx"
    path.write_bytes(model_bytes)
    if not parser.parse_from_file(str(path)):
        raise RuntimeError("; ".join(str(parser.get_error(i)) for i in range(parser.num_errors)))
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 1 << 28)
    cache = config.create_timing_cache(b"")
    config.set_timing_cache(cache, ignore_mismatch=False)
    profile = builder.create_optimization_profile()
    inp = network.get_input(0)
    profile.set_shape(inp.name, (1, 3, 8, 8), (2, 3, 8, 8), (4, 3, 8, 8))
    config.add_optimization_profile(profile)
    serialized = builder.build_serialized_network(network, config)
    with open(tmp_path / "model.plan", "wb") as f:
        f.write(serialized)
    runtime = trt.Runtime(logger)
    with open(tmp_path / "model.plan", "rb") as f:
        engine = runtime.deserialize_cuda_engine(f.read())
    return engine, cache


def tensorrt_style_infer(engine, images: np.ndarray) -> dict:
    context = engine.create_execution_context()
    buffers = {}
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
            context.set_input_shape(name, images.shape)
            buffers[name] = np.ascontiguousarray(images)
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) == trt.TensorIOMode.OUTPUT:
            shape = context.get_tensor_shape(name)
            buffers[name] = np.empty(trt.volume(shape), dtype=trt.nptype(engine.get_tensor_dtype(name))).reshape(shape)
    for name, buf in buffers.items():
        context.set_tensor_address(name, buf.ctypes.data)
    stream = 0
    assert context.execute_async_v3(stream)
    return {n: b for n, b in buffers.items() if engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT}


def test_tensorrt_script_matches_onnxruntime(model_bytes, tmp_path):
    engine, cache = tensorrt_style_build(model_bytes, tmp_path)
    assert [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)] == ["images", "scores"]
    assert tuple(engine.get_tensor_shape("images")) == (-1, 3, 8, 8)
    assert engine.get_tensor_dtype("scores") == trt.DataType.FLOAT
    assert [tuple(s) for s in engine.get_tensor_profile_shape("images", 0)] == [(1, 3, 8, 8), (2, 3, 8, 8), (4, 3, 8, 8)]
    assert cache.serialize().startswith(b"{")
    for batch in (1, 3):
        images = np.random.default_rng(batch).standard_normal((batch, 3, 8, 8)).astype(np.float32)
        got = tensorrt_style_infer(engine, images)
        want = ort_run(model_bytes, {"images": images})
        assert got["scores"].shape == (batch, 5)
        np.testing.assert_allclose(got["scores"], want["scores"], rtol=1e-4, atol=1e-6)


def test_execute_v2_and_tensor_addresses(model_bytes, tmp_path):
    engine, _ = tensorrt_style_build(model_bytes, tmp_path)
    images = torch.randn(2, 3, 8, 8)
    want = ort_run(model_bytes, {"images": images.numpy()})["scores"]
    context = engine.create_execution_context()
    context.set_input_shape("images", tuple(images.shape))
    assert context.all_input_dimensions_specified and context.infer_shapes() == []
    out = torch.empty(tuple(context.get_tensor_shape("scores")))
    assert context.execute_v2([images.data_ptr(), out.data_ptr()])
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-6)
    out2 = torch.zeros_like(out)
    context.set_tensor_address("images", images)
    context.set_tensor_address("scores", out2)
    context.execute_async_v3(0)
    assert torch.equal(out, out2)
    assert context.get_tensor_address("scores") == out2.data_ptr()


def test_execution_context_refuses_bad_shapes(model_bytes, tmp_path):
    engine, _ = tensorrt_style_build(model_bytes, tmp_path)
    context = engine.create_execution_context()
    with pytest.raises(ShapeError, match="outside optimization profile 0"):
        context.set_input_shape("images", (9, 3, 8, 8))
    assert context.infer_shapes() == ["images"]
    assert tuple(context.get_tensor_shape("scores")) == (-1, 5)
    with pytest.raises(ShapeError, match="no shape was set"):
        context.execute_async_v3(0)
    context.set_input_shape("images", (2, 3, 8, 8))
    context.set_tensor_address("images", torch.zeros(2, 3, 8, 8))
    context.set_tensor_address("scores", torch.zeros(3, 5))
    with pytest.raises(TensorforgeError, match="allocate it with the shape"):
        context.execute_async_v3(0)


def test_parser_reports_every_unsupported_node():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok"),
             helper.make_node("NoSuchOp", ["a"], ["b"], name="bad1"),
             helper.make_node("Sigmoid", ["b"], ["c"], name="after"),
             helper.make_node("Frobnicate", ["x"], ["d"], name="bad2", domain="acme"),
             helper.make_node("Add", ["c", "d"], ["y"], name="sum")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("acme", 1)])
    network = trt.Builder(LOGGER).create_network(0)
    parser = trt.OnnxParser(network, LOGGER)
    assert not parser.parse(model.SerializeToString())
    errors = [parser.get_error(i) for i in range(parser.num_errors)]
    assert [(e.node(), e.node_name(), e.code()) for e in errors] == [
        (1, "bad1", trt.ErrorCode.UNSUPPORTED_NODE), (3, "bad2", trt.ErrorCode.UNSUPPORTED_NODE)]
    assert "NoSuchOp is not supported" in errors[0].desc() and "no plugin is registered for acme::Frobnicate" in errors[1].desc()
    ok, groups = parser.supports_model(model.SerializeToString())
    assert not ok and groups == [([0], True), ([1], False), ([2], True), ([3], False), ([4], True)]
    assert parser.supports_operator("Relu") and not parser.supports_operator("NoSuchOp")
    assert network.num_layers == 0


def test_parser_rejects_garbage_bytes():
    parser = trt.OnnxParser(trt.Builder(LOGGER).create_network(0), LOGGER)
    assert not parser.parse(b"\x00not an onnx model")
    assert parser.num_errors == 1 and parser.get_error(0).code() == trt.ErrorCode.MODEL_DESERIALIZE_FAILED
    parser.clear_errors()
    assert not parser.parse_from_file("/nonexistent/model.onnx") and "not found" in parser.get_error(0).desc()


@pytest.mark.parametrize("flag", [trt.BuilderFlag.INT4, trt.BuilderFlag.REFIT])     # INT8/FP8/SPARSE_WEIGHTS: supported
def test_unsupported_builder_flags_are_refused(flag):
    config = trt.Builder(LOGGER).create_builder_config()
    with pytest.raises(UsageError, match=f"BuilderFlag.{flag.name} is not supported"):
        config.set_flag(flag)
    assert not config.get_flag(flag)


def test_builder_config_maps_to_the_build_config():
    config = trt.Builder(LOGGER).create_builder_config()
    assert config.get_flag(trt.BuilderFlag.TF32)
    config.set_flag(trt.BuilderFlag.FP16)
    config.clear_flag(trt.BuilderFlag.TF32)
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 1 << 20)
    config.builder_optimization_level = 1
    assert (config.config.fp16, config.config.tf32, config.config.workspace_bytes, config.config.optimization_level) == \
        (True, False, 1 << 20, 1)
    assert config.flags == 1 << int(trt.BuilderFlag.FP16)
    config.flags = 1 << int(trt.BuilderFlag.BF16)
    assert (config.config.fp16, config.config.bf16) == (False, True)
    with pytest.raises(UsageError, match="DLA_MANAGED_SRAM is not supported"):
        config.set_memory_pool_limit(trt.MemoryPoolType.DLA_MANAGED_SRAM, 1)
    profile = trt.Builder(LOGGER).create_optimization_profile()
    with pytest.raises(UsageError, match="min <= opt <= max"):
        profile.set_shape("x", (4, 3), (2, 3), (8, 3))


def test_fp16_build_stays_close_to_onnxruntime(model_bytes, tmp_path):
    logger = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    assert trt.OnnxParser(network, logger).parse(model_bytes)
    config = builder.create_builder_config()
    config.set_flag(trt.BuilderFlag.FP16)
    profile = builder.create_optimization_profile()
    profile.set_shape("images", (2, 3, 8, 8), (2, 3, 8, 8), (2, 3, 8, 8))
    config.add_optimization_profile(profile)
    engine = trt.Runtime(logger).deserialize_cuda_engine(builder.build_serialized_network(network, config))
    assert {layer.precision for layer in engine.data.layers} >= {"float16"}
    images = np.random.default_rng(5).standard_normal((2, 3, 8, 8)).astype(np.float32)
    got = tensorrt_style_infer(engine, images)["scores"]
    np.testing.assert_allclose(got, ort_run(model_bytes, {"images": images})["scores"], rtol=2e-2, atol=2e-3)


def test_layers_added_after_parsing(model_bytes):
    """Parse, then extend the parsed network with the layer API: log of the scores as the new output."""
    builder = trt.Builder(LOGGER, device="cpu")
    network = builder.create_network(0)
    assert trt.OnnxParser(network, LOGGER).parse(model_bytes)
    assert network.num_layers > 0 and tuple(network.get_input(0).shape) == (-1, 3, 8, 8)
    scores = network.get_output(0)
    assert scores.name == "scores" and tuple(scores.shape) == (-1, 5) and scores.is_network_output
    zero = network.add_constant((1, 1), np.zeros((1, 1), np.float32)).get_output(0)
    shifted = network.add_elementwise(scores, zero, trt.ElementWiseOperation.SUM)
    top = network.add_reduce(shifted.get_output(0), trt.ReduceOperation.MAX, 1 << 1, keep_dims=False)
    top.get_output(0).name = "best"
    network.unmark_output(scores)
    network.mark_output(top.get_output(0))
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("images", (2, 3, 8, 8), (2, 3, 8, 8), (2, 3, 8, 8))
    config.add_optimization_profile(profile)
    engine = trt.Runtime(LOGGER, device="cpu").deserialize_cuda_engine(builder.build_serialized_network(network, config))
    assert [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)] == ["images", "best"]
    images = np.random.default_rng(2).standard_normal((2, 3, 8, 8)).astype(np.float32)
    best = tensorrt_style_infer(engine, images)["best"]
    np.testing.assert_allclose(best, ort_run(model_bytes, {"images": images})["scores"].max(axis=1), rtol=1e-5, atol=1e-6)


def test_pointer_views_for_dtypes_numpy_lacks():
    """bfloat16 and bool buffers by data_ptr(): viewed in place through same-size integer carriers."""
    builder = trt.Builder(LOGGER, device="cpu")
    network = builder.create_network(0)
    x = network.add_input("x", trt.bfloat16, (2, 3))
    m = network.add_input("m", trt.bool_, (2, 3))
    network.mark_output(network.add_activation(x, trt.ActivationType.RELU).get_output(0))
    network.mark_output(network.add_elementwise(m, m, trt.ElementWiseOperation.XOR).get_output(0))
    engine = trt.Runtime(LOGGER, device="cpu").deserialize_cuda_engine(
        builder.build_serialized_network(network, builder.create_builder_config()))
    assert [engine.get_tensor_dtype(engine.get_tensor_name(i)) for i in range(4)] == \
        [trt.DataType.BF16, trt.DataType.BOOL, trt.DataType.BF16, trt.DataType.BOOL]
    xs, ms = torch.randn(2, 3).to(torch.bfloat16), torch.rand(2, 3) > 0.5
    ys, bs = torch.full((2, 3), 7.0, dtype=torch.bfloat16), torch.ones(2, 3, dtype=torch.bool)
    assert engine.create_execution_context().execute_v2([xs.data_ptr(), ms.data_ptr(), ys.data_ptr(), bs.data_ptr()])
    assert torch.equal(ys, torch.relu(xs)) and not bs.any()
