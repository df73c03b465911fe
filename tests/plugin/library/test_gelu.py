"""custom::MyGelu / CustomGelu and custom::LeakyReLU: the Triton kernels (TRITON_INTERPRET=1) against their torch
references for every autotune config, both GELU forms, fp16, sizes that are not a multiple of the block, and
the alias through ONNX."""

import pytest
import torch
from onnx import TensorProto

import tensorforge as tfg
import tensorforge.plugin as tfp
from plugin_helpers import custom_model


def _plugin(name, ident):
    tfp.discover(name)
    return tfp.get(ident)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_kernel_matches_reference_for_each_config(approximate):
    p = _plugin("MyGelu", "custom::MyGelu")
    x = torch.randn(3, 1111) * 4
    x[0, :4] = torch.tensor([0.0, -30.0, 30.0, 1e-6])
    for cfg in p.configs():
        (got,) = p.run([x], {"approximate": approximate}, cfg)
        torch.testing.assert_close(got, torch.nn.functional.gelu(x, approximate=approximate), rtol=1e-5, atol=1e-6)


def test_gelu_fp16_and_noncontiguous():
    p = _plugin("MyGelu", "custom::MyGelu")
    x = torch.randn(40, 24).half().t()                       # transposed view
    (got,) = p.run([x], {"approximate": "none"})
    assert got.dtype == torch.float16 and got.shape == x.shape
    torch.testing.assert_close(got, torch.nn.functional.gelu(x.float()).half(), rtol=1e-3, atol=1e-3)


def test_leaky_relu_kernel_matches_reference():
    p = _plugin("LeakyReLU", "custom::LeakyReLU")
    x = torch.randn(5, 333)
    for cfg in p.configs():
        for alpha in (0.01, 0.2):
            (got,) = p.run([x], {"alpha": alpha}, cfg)
            torch.testing.assert_close(got, torch.nn.functional.leaky_relu(x, alpha), rtol=0, atol=0)
    (got,) = p.run([x.half()], {"alpha": 0.1})
    torch.testing.assert_close(got, torch.nn.functional.leaky_relu(x.half(), 0.1))


def test_custom_gelu_alias_through_onnx():
    x = torch.randn(2, 50)
    model = custom_model("CustomGelu", [("x", TensorProto.FLOAT, [2, 50])], [("y", TensorProto.FLOAT, None)],
                         approximate="tanh")
    engine = tfg.build(model, device="cpu")
    assert engine.data.layers[0].op == "plugin:custom::MyGelu:1"
    torch.testing.assert_close(engine(x), torch.nn.functional.gelu(x, approximate="tanh"), rtol=1e-5, atol=1e-6)
