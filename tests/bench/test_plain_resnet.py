"""bench/plain_resnet.py is torchvision's ResNet-50 without torchvision: its parameter count is torchvision's published
25,557,032, the convolutions have the 3-4-6-3 bottleneck layout with the stride on the 3×3 conv (ResNet v1.5), and
the ONNX export computes what the module does (onnxruntime, the oracle) under torchvision's module names."""

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
plain_resnet = pytest.importorskip("plain_resnet")
ort = pytest.importorskip("onnxruntime")


def test_architecture_matches_torchvision_resnet50():
    m = plain_resnet.resnet50()
    assert sum(p.numel() for p in m.parameters()) == 25_557_032          # torchvision's resnet50, 1000 classes
    convs = {n: c for n, c in m.named_modules() if isinstance(c, torch.nn.Conv2d)}
    assert len(convs) == 53
    assert [len(getattr(m, f"layer{i}")) for i in range(1, 5)] == [3, 4, 6, 3]
    strided = sorted(n for n, c in convs.items() if c.stride == (2, 2))
    assert strided == ["conv1", "layer2.0.conv2", "layer2.0.downsample.0", "layer3.0.conv2",
                       "layer3.0.downsample.0", "layer4.0.conv2", "layer4.0.downsample.0"]
    assert convs["layer4.2.conv3"].out_channels == 2048 and m.fc.in_features == 2048
    w = convs["layer1.0.conv2"].weight                          # Kaiming normal, fan-out: std = √(2 / (64·3·3))
    assert float(w.std()) == pytest.approx((2 / (64 * 9)) ** 0.5, rel=0.05)


def test_calibrated_model_exports_to_onnx_that_onnxruntime_runs_the_same(tmp_path):
    m = plain_resnet.make(image=64)
    bn = m.layer1[0].bn1
    assert not torch.allclose(bn.running_var, torch.ones_like(bn.running_var))     # zoo.calibrate re-estimated it
    data = plain_resnet.export(m, image=64)
    ops = Counter(n.op_type for n in onnx.load_from_string(data).graph.node)
    assert ops["Conv"] == 53 and ops["Add"] == 16 and ops["Gemm"] == 1 and ops["GlobalAveragePool"] == 1
    names = {n.name for n in onnx.load_from_string(data).graph.node}
    assert {"/conv1/Conv", "/layer1/layer1.0/downsample/downsample.0/Conv", "/layer4/layer4.2/Add", "/fc/Gemm"} <= names
    x = torch.randn(3, 3, 64, 64, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        want = m(x).numpy()
    got = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"input": x.numpy()})[0]
    assert got.shape == (3, 1000)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * float(np.abs(want).max()))
