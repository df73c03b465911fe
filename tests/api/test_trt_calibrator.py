"""A calibrator written in TensorRT's idiom runs with `import tensorforge as trt`; dynamic ranges; constraints."""

import os
import sys

import numpy as np
import pytest
import torch

import tensorforge as trt
from tensorforge.builder.calibration import read_cache
from tensorforge.engine import from_bytes
from tensorforge.util.errors import BuildError, UsageError

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
from oracle import ort_run  # noqa: E402
from precision_models import cosine, images, small_cnn  # noqa: E402

LOGGER = trt.Logger(trt.Logger.ERROR)


class TorchCalibrator(trt.IInt8EntropyCalibrator2):
    """As TensorRT's samples write it, with a torch tensor where they use cuda.mem_alloc."""

    def __init__(self, batches, cache_file):
        trt.IInt8EntropyCalibrator2.__init__(self)
        self.batches, self.cache_file, self.calls = iter(batches), cache_file, 0
        self.device_input = torch.empty(1, 3, 8, 8)

    def get_batch_size(self):
        return 1

    def get_batch(self, names):
        self.calls += 1
        try:
            self.device_input.copy_(torch.from_numpy(next(self.batches)))
        except StopIteration:
            return None
        return [int(self.device_input.data_ptr())]

    def read_calibration_cache(self):
        if os.path.exists(self.cache_file):
            with open(self.cache_file, "rb") as f:
                return f.read()
        return None

    def write_calibration_cache(self, cache):
        with open(self.cache_file, "wb") as f:
            f.write(cache)


class NumpyMinMax(trt.IInt8MinMaxCalibrator):
    """Host batches through a numpy buffer's address (cuda-python users pass a host pointer the same way)."""

    def __init__(self, batches):
        super().__init__()
        self.batches = iter(batches)
        self.host = np.empty((1, 3, 8, 8), np.float32)

    def get_batch_size(self):
        return 1

    def get_batch(self, names):
        try:
            self.host[...] = next(self.batches)
        except StopIteration:
            return []
        return [self.host.ctypes.data]


def _build(calibrator=None, ranges=None, obey_layer=None):
    builder = trt.Builder(LOGGER, device="cpu")
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, LOGGER)
    assert parser.parse(small_cnn())
    config = builder.create_builder_config()
    config.set_flag(trt.BuilderFlag.INT8)
    if calibrator is not None:
        config.int8_calibrator = calibrator
    for name, r in (ranges or {}).items():
        network_tensor = next(network.get_layer(i).get_output(0) for i in range(len(network))
                              if network.get_layer(i).get_output(0).name == name) if name != "x" else network.get_input(0)
        assert network_tensor.set_dynamic_range(-r, r)
        assert network_tensor.dynamic_range == (-r, r)
    if obey_layer is not None:
        config.set_flag(trt.BuilderFlag.OBEY_PRECISION_CONSTRAINTS)
        next(la for la in network if la.name == obey_layer).precision = trt.int8
    plan = builder.build_serialized_network(network, config)
    return from_bytes(bytes(plan))


def _run(engine, x):
    from tensorforge.runtime import ExecutionContext
    return ExecutionContext(engine, torch.device("cpu")).run({"x": torch.from_numpy(x)})["y"].numpy()


def test_entropy_calibrator_with_device_pointers_then_cache(tmp_path):
    cache = tmp_path / "model.cache"
    calib = TorchCalibrator(images(16, seed=1), str(cache))
    engine = _build(calib)
    assert calib.calls == 17                                 # 16 batches, then None
    assert engine.build_info["quantization"]["ranges"] == "calibration"
    assert engine.build_info["quantization"]["layers"] == ["conv1", "conv2", "fc"]
    text = cache.read_bytes()
    assert text.startswith(b"TRT-8601-EntropyCalibration2\n")
    parsed = read_cache(text)
    assert [n for n, _ in parsed.entries][0] == "x"
    x = images(1, seed=99)[0]
    want = ort_run(small_cnn(), {"x": x})["y"]
    assert cosine(_run(engine, x), want) > 0.99
    again = TorchCalibrator(images(16, seed=1), str(cache))
    engine2 = _build(again)                                  # the cache is read: no batch is asked for
    assert again.calls == 0 and engine2.build_info["quantization"]["ranges"] == "cache"
    np.testing.assert_array_equal(_run(engine2, x), _run(engine, x))


def test_minmax_calibrator_with_a_host_pointer_gives_max_abs_scales():
    batches = images(4, seed=2)
    engine = _build(NumpyMinMax(batches))
    scales = engine.build_info["quantization"]["tensor_scales"]
    assert scales["x"] == pytest.approx(max(np.abs(b).max() for b in batches) / 127, rel=1e-6)


def test_set_dynamic_range_sets_the_scale_and_pointer_errors_are_one_line():
    engine = _build(ranges={"x": 3.0, "a1": 5.0, "f": 2.0})
    scales = engine.build_info["quantization"]["tensor_scales"]
    assert scales["x"] == pytest.approx(3.0 / 127) and scales["a1"] == pytest.approx(5.0 / 127)
    q = [la for la in engine.layers if la.op == "QuantizeLinear" and la.inputs[0] == "x"]
    assert q and float(engine.constants[q[0].inputs[1]]) == pytest.approx(3.0 / 127)

    class Lost(trt.IInt8EntropyCalibrator2):
        def get_batch(self, names):
            return [12345]
    with pytest.raises(UsageError, match="inside no buffer"):
        _build(Lost())


def test_obey_with_an_impossible_constraint_names_the_layer():
    with pytest.raises(BuildError, match="'pool'"):
        _build(ranges={"x": 3.0}, obey_layer="pool")          # GlobalAveragePool has no int8 implementation


def test_layer_precision_and_output_type_reach_the_build():
    builder = trt.Builder(LOGGER, device="cpu")
    network = builder.create_network(0)
    assert trt.OnnxParser(network, LOGGER).parse(small_cnn())
    config = builder.create_builder_config()
    config.set_flag(trt.BuilderFlag.FP16)
    config.set_flag(trt.BuilderFlag.OBEY_PRECISION_CONSTRAINTS)
    layers = {la.name: la for la in network}
    layers["conv2"].precision = trt.float32
    layers["act1"].set_output_type(0, trt.float32)
    assert layers["conv2"].precision == trt.float32 and layers["act1"].get_output_type(0) == trt.float32
    engine = from_bytes(bytes(builder.build_serialized_network(network, config)))
    conv2 = [la for la in engine.layers if "conv2" in la.origin and la.op != "Cast"]
    conv1 = [la for la in engine.layers if "conv1" in la.origin and la.op != "Cast"]
    assert conv2 and all(la.precision == "float32" for la in conv2)
    assert conv1 and all(la.precision == "float16" for la in conv1)
    made = [la for la in engine.layers if la.outputs == ["a1"]]                # act1's output, asked for in float32
    assert made and made[0].op == "Cast" and made[0].attrs["to"] == "float32"
    x = images(1, seed=4)[0]
    assert cosine(_run(engine, x), ort_run(small_cnn(), {"x": x})["y"]) > 0.999
