"""TensorRT's Python samples, rewritten in their idiom with only the import changed (and torch buffers standing in
for cuda-python: common_torch.py), run on the CPU against independent oracles.

  network_api_pytorch_mnist  the layer-by-layer network API from a PyTorch model's weights   → eager torch
  onnx_resnet50              OnnxParser + allocate_buffers + do_inference on a normalised image → onnxruntime
  simple_progress_monitor    config.progress_monitor = IProgressMonitor subclass               → phase/step log
  dynamic shapes (common.py) two optimization profiles, set_optimization_profile_async         → onnxruntime
  engine inspector           create_engine_inspector, ONE_LINE and JSON                        → the ONNX graph
Every sample uses the `with trt.Builder(...) as builder, ...` form of TensorRT's samples.
"""

import json

import numpy as np
import pytest
import torch

import tensorforge as trt  # was: import tensorrt as trt
from common_torch import allocate_buffers, do_inference, stream_context
from oracle import export, ort_run

TRT_LOGGER = trt.Logger(trt.Logger.WARNING)
GiB = 1 << 30


class MnistNet(torch.nn.Module):
    """The sample's LeNet shape: conv 20@5x5, maxpool 2, conv 50@5x5, maxpool 2, fc 500, relu, fc 10."""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = torch.nn.Conv2d(1, 20, 5), torch.nn.Conv2d(20, 50, 5)
        self.fc1, self.fc2 = torch.nn.Linear(800, 500), torch.nn.Linear(500, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(self.conv1(x), 2)
        x = torch.nn.functional.max_pool2d(self.conv2(x), 2)
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


def _populate_mnist(network, w):
    data = network.add_input(name="data", dtype=trt.float32, shape=(1, 1, 28, 28))

    def fc(x, n, weight, bias):
        k = int(np.prod(x.shape))
        flat = network.add_shuffle(x)
        flat.reshape_dims = trt.Dims2(1, k)
        filt = network.add_constant(trt.Dims2(n, k), weight)
        mm = network.add_matrix_multiply(flat.get_output(0), trt.MatrixOperation.NONE, filt.get_output(0),
                                         trt.MatrixOperation.TRANSPOSE)
        b = network.add_constant(trt.Dims2(1, n), bias)
        add = network.add_elementwise(mm.get_output(0), b.get_output(0), trt.ElementWiseOperation.SUM)
        out = network.add_shuffle(add.get_output(0))
        out.reshape_dims = trt.Dims4(1, n, 1, 1)
        return out

    conv1 = network.add_convolution_nd(input=data, num_output_maps=20, kernel_shape=(5, 5),
                                       kernel=w["conv1.weight"], bias=w["conv1.bias"])
    conv1.stride_nd = (1, 1)
    pool1 = network.add_pooling_nd(input=conv1.get_output(0), type=trt.PoolingType.MAX, window_size=(2, 2))
    pool1.stride_nd = trt.Dims2(2, 2)
    conv2 = network.add_convolution_nd(pool1.get_output(0), 50, (5, 5), w["conv2.weight"], w["conv2.bias"])
    pool2 = network.add_pooling_nd(conv2.get_output(0), trt.PoolingType.MAX, (2, 2))
    pool2.stride_nd = trt.Dims2(2, 2)
    fc1 = fc(pool2.get_output(0), 500, w["fc1.weight"], w["fc1.bias"])
    relu = network.add_activation(input=fc1.get_output(0), type=trt.ActivationType.RELU)
    fc2 = fc(relu.get_output(0), 10, w["fc2.weight"], w["fc2.bias"])
    fc2.get_output(0).name = "prob"
    network.mark_output(tensor=fc2.get_output(0))


def test_network_api_pytorch_mnist():
    model = MnistNet().eval()
    weights = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    flags = 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    with trt.Builder(TRT_LOGGER) as builder, builder.create_network(flags) as network, \
            builder.create_builder_config() as config, trt.Runtime(TRT_LOGGER) as runtime:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, GiB)
        _populate_mnist(network, weights)
        assert [network.get_layer(i).type for i in range(3)] == [trt.LayerType.CONVOLUTION, trt.LayerType.POOLING,
                                                                 trt.LayerType.CONVOLUTION]
        plan = builder.build_serialized_network(network, config)
        engine = runtime.deserialize_cuda_engine(plan)
    inputs, outputs, bindings = allocate_buffers(engine)
    with engine.create_execution_context() as context, stream_context(engine.device) as stream:
        for seed in range(3):
            img = torch.Generator().manual_seed(seed)
            case = torch.rand((1, 1, 28, 28), generator=img)
            np.copyto(inputs[0].host, case.numpy().ravel())
            [output] = do_inference(context, engine=engine, bindings=bindings, inputs=inputs, outputs=outputs,
                                    stream=stream)
            want = model(case).detach().numpy().ravel()
            np.testing.assert_allclose(output, want, rtol=1e-4, atol=1e-5)
            assert np.argmax(output) == np.argmax(want)


class SmallResNet(torch.nn.Module):
    """A two-block residual CNN with batch norm, global pool and a 10-way classifier (resnet50 in miniature)."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, 2, 1), torch.nn.BatchNorm2d(8), torch.nn.ReLU())
        self.block = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, 1, 1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                         torch.nn.Conv2d(8, 8, 3, 1, 1), torch.nn.BatchNorm2d(8))
        self.head = torch.nn.Linear(8, 10)

    def forward(self, x):
        x = self.stem(x)
        x = torch.relu(x + self.block(x))
        return torch.softmax(self.head(x.mean((2, 3))), 1)


@pytest.fixture(scope="module")
def resnet_onnx(tmp_path_factory):
    torch.manual_seed(0)
    model = SmallResNet().eval()
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    data = export(model, (torch.rand(1, 3, 32, 32),), input_names=["input"], output_names=["output"])
    path = tmp_path_factory.mktemp("resnet") / "resnet.onnx"
    path.write_bytes(data)
    return path


def _build_engine_onnx(model_file, monitor=None):
    with trt.Builder(TRT_LOGGER) as builder, builder.create_network(0) as network, \
            builder.create_builder_config() as config, trt.OnnxParser(network, TRT_LOGGER) as parser, \
            trt.Runtime(TRT_LOGGER) as runtime:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, GiB)
        if monitor is not None:
            config.progress_monitor = monitor
        with open(model_file, "rb") as model:
            if not parser.parse(model.read()):
                raise RuntimeError("; ".join(str(parser.get_error(e)) for e in range(parser.num_errors)))
        plan = builder.build_serialized_network(network, config)
        return None if plan is None else runtime.deserialize_cuda_engine(plan)


def _normalized_image(seed: int) -> np.ndarray:
    """The sample's preprocessing: HWC uint8 image → CHW float32, (x/255 - mean) / std."""
    img = np.random.default_rng(seed).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    x = img.transpose(2, 0, 1).astype(trt.nptype(trt.float32)) / 255.0
    return ((x - 0.45) / 0.225).ravel()


def test_onnx_resnet(resnet_onnx):
    engine = _build_engine_onnx(resnet_onnx)
    inputs, outputs, bindings = allocate_buffers(engine)
    with engine.create_execution_context() as context:
        for seed in range(2):
            inputs[0].host = _normalized_image(seed)
            [probs] = do_inference(context, engine=engine, bindings=bindings, inputs=inputs, outputs=outputs,
                                   stream=0)
            want = ort_run(resnet_onnx.read_bytes(), {"input": inputs[0].host.reshape(1, 3, 32, 32).copy()})["output"]
            np.testing.assert_allclose(probs, want.ravel(), rtol=1e-4, atol=1e-6)
            assert np.argmax(probs) == np.argmax(want)


class RecordingMonitor(trt.IProgressMonitor):
    """simple_progress_monitor's shape: tracks active phases and steps; optionally cancels after some steps."""

    def __init__(self, cancel_after=None):
        trt.IProgressMonitor.__init__(self)
        self._active = {}
        self.events = []
        self.cancel_after = cancel_after

    def phase_start(self, phase_name, parent_phase, num_steps):
        assert parent_phase is None or parent_phase in self._active
        self._active[phase_name] = num_steps
        self.events.append(("start", phase_name, parent_phase, num_steps))

    def step_complete(self, phase_name, step):
        assert 0 <= step < self._active[phase_name]
        self.events.append(("step", phase_name, step))
        done = sum(e[0] == "step" for e in self.events)
        return self.cancel_after is None or done < self.cancel_after

    def phase_finish(self, phase_name):
        del self._active[phase_name]
        self.events.append(("finish", phase_name))


def test_simple_progress_monitor(resnet_onnx):
    monitor = RecordingMonitor()
    engine = _build_engine_onnx(resnet_onnx, monitor)
    assert monitor._active == {}
    starts = {e[1]: e for e in monitor.events if e[0] == "start"}
    assert starts["Building engine"][2:] == (None, 3)
    _, _, parent, n = starts["Choosing tactics"]
    assert parent == "Building engine" and n == engine.num_layers
    steps = [e[2] for e in monitor.events if e[:2] == ("step", "Choosing tactics")]
    assert steps == list(range(engine.num_layers))
    assert [e[2] for e in monitor.events if e[:2] == ("step", "Building engine")] == [0, 1, 2]
    cancel = RecordingMonitor(cancel_after=3)
    assert _build_engine_onnx(resnet_onnx, cancel) is None          # cancelled: no engine, as TensorRT
    assert cancel._active == {}


def test_dynamic_shapes_two_profiles(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.GELU()).eval()
    data = export(model, (torch.rand(2, 6),), input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "n"}})
    with trt.Builder(TRT_LOGGER) as builder, builder.create_network(0) as network, \
            builder.create_builder_config() as config, trt.OnnxParser(network, TRT_LOGGER) as parser:
        assert parser.parse(data)
        for mn, opt, mx in (((1, 6), (2, 6), (4, 6)), ((8, 6), (16, 6), (32, 6))):
            profile = builder.create_optimization_profile()
            profile.set_shape("x", mn, opt, mx)
            config.add_optimization_profile(profile)
        plan = builder.build_serialized_network(network, config)
    engine = trt.Runtime(TRT_LOGGER).deserialize_cuda_engine(plan)
    assert engine.num_optimization_profiles == 2
    assert [tuple(d) for d in engine.get_tensor_profile_shape("x", 1)] == [(8, 6), (16, 6), (32, 6)]
    inputs, outputs, bindings = allocate_buffers(engine, profile_idx=1)
    context = engine.create_execution_context()
    context.set_optimization_profile_async(1, 0)
    x = np.random.default_rng(0).standard_normal((12, 6)).astype(np.float32)
    assert context.set_input_shape("x", x.shape)
    inputs[0].host = x
    [y] = do_inference(context, engine, bindings, inputs, outputs, 0)
    want = ort_run(data, {"x": x})["y"]
    np.testing.assert_allclose(y[:want.size].reshape(want.shape), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(trt.ShapeError if hasattr(trt, "ShapeError") else Exception, match="profile 1"):
        context.set_input_shape("x", (2, 6))                       # explicit profile 1 does not take 2 rows
    auto = engine.create_execution_context()                        # no profile set: chosen by the shape
    auto.set_input_shape("x", (12, 6))
    assert auto.active_optimization_profile == 1
    auto.set_input_shape("x", (3, 6))
    assert auto.active_optimization_profile == 0


def test_engine_inspector(resnet_onnx):
    engine = _build_engine_onnx(resnet_onnx)
    inspector = engine.create_engine_inspector()
    info = json.loads(inspector.get_engine_information(trt.LayerInformationFormat.JSON))
    assert len(info["Layers"]) == engine.num_layers and info["Bindings"] == ["input", "output"]
    import onnx
    nodes = {n.name for n in onnx.load(str(resnet_onnx)).graph.node}
    origins = {o for layer in info["Layers"] for o in layer["Origin"]}
    assert origins and origins <= nodes                               # every layer names the ONNX nodes it came from
    assert any(layer["TensorRTLayerType"] == "CONVOLUTION" for layer in info["Layers"])
    line = inspector.get_layer_information(0, trt.LayerInformationFormat.ONE_LINE)
    assert "\n" not in line and info["Layers"][0]["Name"] in line
    assert json.loads(inspector.get_layer_information(0, trt.LayerInformationFormat.JSON))["Name"] == \
        info["Layers"][0]["Name"]
    assert len(inspector.get_engine_information(trt.LayerInformationFormat.ONE_LINE).splitlines()) == engine.num_layers
