"""tfg.build(..., int8=True, calibration_data=..., calibration_cache=...) and the calibration run itself: ranges
against numpy on the same data, Q/DQ placement, weights per output channel, accuracy against onnxruntime."""

import io

import numpy as np
import pytest
import torch

import tensorforge as tfg
from oracle import ort_run
from precision_models import cosine, depthwise_cnn, images, small_cnn
from tensorforge.builder.calibration import CalibrationSettings, calibrate, insert_qdq
from tensorforge.ir import get_spec
from tensorforge.parser import parse_model
from tensorforge.util.errors import UsageError
from tensorforge.util.log import get_logger


def test_minmax_ranges_are_the_max_abs_of_each_tensor():
    net = parse_model(small_cnn())
    batches = images(3, seed=4)
    amax = calibrate(net, [{"x": torch.from_numpy(b)} for b in batches], torch.device("cpu"),
                     CalibrationSettings("minmax"))
    assert list(amax)[0] == "x" and amax["x"] == pytest.approx(max(np.abs(b).max() for b in batches))
    # c1 by numpy: conv with pad 1 as a sum over the 3x3 window
    w, bias = (net.constants["W1"].numpy(), net.constants["B1"].numpy())
    top = pos = 0.0
    for b in batches:
        p = np.pad(b, ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((1, 8, 8, 8))
        for i in range(3):
            for j in range(3):
                out += np.einsum("nchw,oc->nohw", p[:, :, i:i + 8, j:j + 8], w[:, :, i, j])
        c1 = out + bias[None, :, None, None]
        top, pos = max(top, np.abs(c1).max()), max(pos, c1.max())
    assert amax["c1"] == pytest.approx(top, rel=1e-5)
    assert amax["a1"] == pytest.approx(pos, rel=1e-5)                       # relu: the positive part


def test_inserted_weights_are_quantized_per_output_channel():
    net = parse_model(small_cnn())
    w = net.constants["W1"].clone()
    report = insert_qdq(net, {"x": 2.0, "a1": 3.0, "f": 1.0}, "int8")
    assert report.layers == ["conv1", "conv2", "fc"] and report.scales["x"] == pytest.approx(2.0 / 127)
    dq = next(la for la in net.layers if la.op == "DequantizeLinear" and la.inputs[0].startswith("W1"))
    q, s = net.constants[dq.inputs[0]], net.constants[dq.inputs[1]]
    want_s = np.abs(w.numpy()).reshape(8, -1).max(axis=1) / 127
    np.testing.assert_allclose(s.numpy(), want_s, rtol=1e-6)
    np.testing.assert_array_equal(q.numpy(), np.clip(np.round(w.numpy() / want_s[:, None, None, None]), -128, 127))
    back = get_spec("DequantizeLinear").reference(q, s, net.constants[dq.inputs[2]], axis=0)
    assert (back - w).abs().max() <= s.max() / 2 + 1e-7


def test_high_level_build_from_a_folder_and_a_cache(tmp_path):
    folder = tmp_path / "calib"
    folder.mkdir()
    for i, x in enumerate(images(10, seed=8)):
        np.save(folder / f"{i:02d}.npy", x)
    cache = tmp_path / "model.cache"
    e1 = tfg.build(small_cnn(), int8=True, calibration_data=str(folder), calibration_cache=str(cache), device="cpu")
    assert cache.exists() and e1.data.build_info["quantization"]["ranges"] == "calibration"
    e2 = tfg.build(small_cnn(), int8=True, calibration_cache=str(cache), device="cpu")
    assert e2.data.build_info["quantization"]["ranges"] == "cache"
    x = images(1, seed=123)[0]
    want = ort_run(small_cnn(), {"x": x})["y"]
    assert cosine(e1.run({"x": x})["y"], want) > 0.99
    np.testing.assert_array_equal(e2.run({"x": x})["y"], e1.run({"x": x})["y"])
    with pytest.raises(UsageError, match="need int8=True"):
        tfg.build(small_cnn(), calibration_data=str(folder), device="cpu")


def test_fp8_build_uses_e4m3_scales():
    e = tfg.build(small_cnn(), fp8=True, calibration_data=[{"x": x} for x in images(6, seed=1)],
                  calibration_algorithm="minmax", device="cpu")
    q = e.data.build_info["quantization"]
    assert q["kind"] == "fp8"
    x = images(1, seed=5)[0]
    assert cosine(e.run({"x": x})["y"], ort_run(small_cnn(), {"x": x})["y"]) > 0.99


def test_depthwise_convs_keep_their_float_precision(monkeypatch):
    """Implicit INT8 gives Q/DQ only to layers a quantized GEMM kernel runs: the depthwise conv would run the exact
    float32 fallback (slower than fp16, no more accurate), so it stays float, with the reason in the report; the
    engine still matches fp32 onnxruntime (cosine ≥ 0.99)."""
    net = parse_model(depthwise_cnn())
    report = insert_qdq(net, {"x": 2.0, "a1": 3.0, "ad": 3.0, "f": 1.0}, "int8")
    assert report.layers == ["conv1", "pw", "fc"]
    assert "group=8" in report.skipped["dw"]
    calib = [{"x": x} for x in images(8, seed=3)]
    log = io.StringIO()
    monkeypatch.setattr(get_logger(), "stream", log)
    monkeypatch.setattr(get_logger(), "min_severity", get_logger().INFO)
    engine = tfg.build(depthwise_cnn(), int8=True, calibration_data=calib, device="cpu")
    assert ("Q/DQ inserted at 3 layer(s); 1 quantizable layer(s) stay float; 1 × no quantized GEMM kernel takes it "
            "(grouped convolution (group=N) runs on the reference)") in log.getvalue(), log.getvalue()
    quantized = [la for la in engine.data.layers if la.op.startswith("Quantized")]
    assert len(quantized) == 3 and all(la.attrs.get("group", 1) == 1 for la in quantized)
    # the depthwise conv runs in float; its epilogue may also write the next quantized conv's codes
    assert any(la.op in ("Conv", "FusedConv", "FusedConvQuantize") and la.attrs.get("group") == 8
               for la in engine.data.layers)
    x = images(1, seed=11)[0]
    assert cosine(engine.run({"x": x})["y"], ort_run(depthwise_cnn(), {"x": x})["y"]) >= 0.99
