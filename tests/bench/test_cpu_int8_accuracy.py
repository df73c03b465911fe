"""bench/cpu_int8_accuracy.py on the tiny stand-in CNN: our INT8 engine is scored against fp32 onnxruntime (the
oracle) and the depthwise switch is undone after its build, also when the build fails."""

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
pytest.importorskip("onnxruntime")
cpu_int8_accuracy = pytest.importorskip("cpu_int8_accuracy")
zoo = pytest.importorskip("zoo")


def test_scored_against_onnxruntime_and_the_switch_is_restored(monkeypatch):
    from tensorforge.builder.calibration import qdq_insert
    from zoo_case import ort_reference
    original = qdq_insert._no_fast_kernel
    data, _ = zoo.export("tiny_cnn", zoo.make("tiny_cnn"))
    xs = cpu_int8_accuracy.precision_case.test_inputs("tiny_cnn")[:8]
    line = cpu_int8_accuracy.ours(data, "tiny_cnn", xs, ort_reference(data, xs, 1), depthwise=True)
    n, cos = re.match(r"(\d+) quantized layers, cos ([0-9.]+)", line).groups()
    assert int(n) > 0 and 0.9 < float(cos) <= 1.0
    assert qdq_insert._no_fast_kernel is original
    import tensorforge
    monkeypatch.setattr(tensorforge, "build", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("no build")))
    with pytest.raises(RuntimeError, match="no build"):
        cpu_int8_accuracy.ours(data, "tiny_cnn", xs, ort_reference(data, xs, 1), depthwise=True)
    assert qdq_insert._no_fast_kernel is original
