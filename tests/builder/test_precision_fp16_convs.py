"""--fp16 on convolutions whose folded weights are large enough to stay meta during inference (a 64→128 1×1 conv
with BatchNorm: resnet50's downsample). After the constants turn half, the float32 activation cannot be evaluated
with them until its cast is in place; the precision pass must place the cast rather than fail. On the H200 every
fp16 resnet50 build failed here ("Input type (float) and bias type (c10::Half) should be the same")."""

import io

import numpy as np
import pytest
import torch

import tensorforge as tfg

from oracle import ort_run


def _export(module, x) -> bytes:
    buf = io.BytesIO()
    torch.onnx.export(module.eval(), (x,), buf, dynamo=False, opset_version=17)
    return buf.getvalue()


@pytest.mark.parametrize("cout", [8, 128, 256])
def test_fp16_conv_bn_builds_and_matches_onnxruntime(cout):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(64, cout, 1, bias=False), torch.nn.BatchNorm2d(cout),
                            torch.nn.ReLU(), torch.nn.Conv2d(cout, 32, 3, padding=1))
    x = torch.randn(1, 64, 8, 8)
    model = _export(m, x)
    engine = tfg.build(model, fp16=True, device="cpu")
    conv_precisions = {la.precision for la in engine.data.layers if "Conv" in la.op}
    assert conv_precisions == {"float16"}
    got = engine.run({"x.1" if False else engine.input_names[0]: x.numpy()})
    want = ort_run(model, {engine.input_names[0]: x.numpy()})
    for name, w in want.items():
        g = got[name]
        assert g.dtype == np.float32
        assert np.abs(g - w).max() <= 2e-2 * np.abs(w).max()
