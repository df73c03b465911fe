"""int8 / fp8 through torch.compile(backend="tensorforge") and tfg.compile, with calibration batches given as the
model's inputs (frontend_torch/quant_options.py). Oracles: the min-max range of the input is max|x| over the
batches (a closed form, read back from the TensorRT-format cache the build writes), and the output against eager
fp32 PyTorch (cosine ≥ 0.99, and not equal to it: the layers did quantize)."""

import struct

import numpy as np
import pytest
import torch
import torch.nn as nn

import tensorforge as tfg
import tensorforge.frontend_torch as ft
from tensorforge.util.errors import UsageError


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        y = torch.relu(self.c2(torch.relu(self.c1(x))))
        return self.fc(y.mean((2, 3)))


def _batches():
    g = torch.Generator().manual_seed(3)
    return [(torch.randn(2, 3, 12, 12, generator=g) * s,) for s in (1.0, 2.0, 1.5)]


def _cosine(a, b):
    a, b = a.double().flatten(), b.double().flatten()
    return float(a @ b / (a.norm() * b.norm()))


def _scales(path):
    lines = path.read_text().splitlines()
    assert lines[0].startswith("TRT-") and "MinMaxCalibration" in lines[0]
    return {k: struct.unpack(">f", bytes.fromhex(v))[0] for k, v in (line.split(": ") for line in lines[1:])}


def test_backend_int8_calibrates_on_the_models_inputs(tmp_path):
    torch.manual_seed(0)
    m, batches, cache = Net().eval(), _batches(), tmp_path / "net.cache"
    x = torch.randn(2, 3, 12, 12)
    with torch.no_grad():
        torch._dynamo.reset()
        f = torch.compile(m, backend="tensorforge", options={
            "int8": True, "calibration_data": batches, "calibration_cache": str(cache),
            "calibration_algorithm": "minmax"})
        y, want = f(x), m(x)
    engine = ft.last_report().built[0]
    assert engine.data.build_info["quantization"]["ranges"] == "calibration" and cache.exists()
    input_scale = _scales(cache)[engine.data.input_names[0]]
    assert input_scale == pytest.approx(max(float(b[0].abs().max()) for b in batches) / 127, rel=1e-6)
    assert _cosine(y, want) > 0.99
    assert not torch.allclose(y, want, rtol=1e-5, atol=1e-6)              # quantized, not the fp32 network


def test_tfg_compile_fp8_and_the_cache_reused(tmp_path):
    torch.manual_seed(0)
    m, batches, cache = Net().eval(), _batches(), tmp_path / "net.cache"
    x = torch.randn(2, 3, 12, 12)
    with torch.no_grad():
        c = tfg.compile(m, (x,), int8=True, calibration_data=batches, calibration_cache=str(cache))
        again = tfg.compile(m, (x,), int8=True, calibration_cache=str(cache))      # ranges from the cache only
        np.testing.assert_array_equal(again(x).numpy(), c(x).numpy())
        assert again.report.built[0].data.build_info["quantization"]["ranges"] == "cache"
        f8 = tfg.compile(m, (x,), fp8=True, calibration_data=batches)
        assert f8.report.built[0].data.build_info["quantization"]["kind"] == "fp8"
        assert _cosine(f8(x), m(x)) > 0.99


def test_calibration_batches_must_match_the_inputs_and_need_one_engine():
    torch.manual_seed(0)
    m, x = Net().eval(), torch.randn(2, 3, 12, 12)
    with torch.no_grad(), pytest.raises(UsageError, match="2 value.*takes 1 input"):
        tfg.compile(m, (x,), int8=True, calibration_data=[(x, x)])

    class WithBreak(nn.Module):
        def forward(self, x):
            return torch.cumsum(x, dim=1) * 2.0
    with torch.no_grad(), pytest.raises(UsageError, match="one engine.*cumsum"):
        tfg.compile(WithBreak(), (x,), int8=True, calibration_data=[(x,)])
    with pytest.raises(UsageError, match="need int8=True"):
        tfg.compile(m, (x,), calibration_data=[(x,)])


def test_the_range_check_can_fail(tmp_path, monkeypatch):
    """Calibrating on the first batch alone (scale 1 of the 1, 2, 1.5 batches) must miss the closed form."""
    from tensorforge.frontend_torch import quant_options
    real = quant_options.PositionalBatches.feeds
    monkeypatch.setattr(quant_options.PositionalBatches, "feeds", lambda self, names: real(self, names)[:1])
    torch.manual_seed(0)
    m, batches, cache = Net().eval(), _batches(), tmp_path / "net.cache"
    with torch.no_grad():
        c = tfg.compile(m, (batches[0][0],), int8=True, calibration_data=batches, calibration_cache=str(cache),
                        calibration_algorithm="minmax")
    got = _scales(cache)[c.report.built[0].data.input_names[0]]
    assert got != pytest.approx(max(float(b[0].abs().max()) for b in batches) / 127, rel=1e-6)
