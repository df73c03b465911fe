"""The 9 'light' models that ship with onnx (onnx/backend/test/data/light): AlexNet, DenseNet-121, Inception
v1/v2, ResNet-50, ShuffleNet, SqueezeNet, VGG-19, ZFNet-512 — opset 9, batch 1, 224×224, weights generated
in-graph by ConstantOfShape.

Each model is built once; its output is compared with onnxruntime and with the stored expected output
(light_*_output_0.pb), then the engine is saved, loaded and compared again.
"""

import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from oracle import assert_close, ort_run

import tensorforge as tfg

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet",
          "vgg19", "zfnet512"]


def _load(name):
    model = onnx.load(os.path.join(LIGHT, f"light_{name}.onnx"))
    expected = onnx.TensorProto()
    with open(os.path.join(LIGHT, f"light_{name}_output_0.pb"), "rb") as f:
        expected.ParseFromString(f.read())
    return model, numpy_helper.to_array(expected)


def test_all_light_models_are_covered():
    found = sorted(f[len("light_"):-len(".onnx")] for f in os.listdir(LIGHT) if f.endswith(".onnx"))
    assert found == sorted(MODELS)


@pytest.mark.parametrize("name", MODELS)
def test_light_model(name, tmp_path):
    model, expected = _load(name)
    inits = {t.name for t in model.graph.initializer}
    (data,) = [i for i in model.graph.input if i.name not in inits]
    shape = [d.dim_value for d in data.type.tensor_type.shape.dim]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    model_bytes = model.SerializeToString()

    want = ort_run(model_bytes, {data.name: x})
    (out_name,) = want
    # the stored output was computed from a constant-weight model whose output does not depend on the input
    np.testing.assert_allclose(want[out_name], expected, rtol=1e-3, atol=1e-4)

    engine = tfg.build(model_bytes, device="cpu")
    got = engine.run({data.name: x})
    assert_close(got, want, rtol=1e-3, atol=1e-4, what=f"{name}: ")
    np.testing.assert_allclose(got[out_name], expected, rtol=1e-3, atol=1e-4)

    path = tmp_path / f"{name}.engine"
    engine.save(path)
    reloaded = tfg.load(path, device="cpu")
    assert_close(reloaded.run({data.name: x}), want, rtol=1e-3, atol=1e-4, what=f"{name} reloaded: ")
