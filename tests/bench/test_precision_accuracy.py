"""The INT8/FP8 rows' accuracy math (bench/accuracy.quantized: cosine, worst sample, top-1 agreement) against values
computed by hand, and precision_case's test-set batching and its refusal of silently ignored options."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
accuracy = pytest.importorskip("accuracy")
precision_case = pytest.importorskip("precision_case")


def test_cosine_by_hand():
    assert accuracy.cosine(np.array([1.0, 0.0]), np.array([1.0, 1.0])) == pytest.approx(1 / math.sqrt(2))
    assert accuracy.cosine(np.array([3.0, 4.0]), np.array([-3.0, -4.0])) == pytest.approx(-1.0)
    assert accuracy.cosine(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[1.0, 2.0], [3.0, 4.0]])) == pytest.approx(1)


def test_quantized_cosine_worst_sample_and_top1():
    want = np.array([[1.0, 0.0, 0.0],          # class 0
                     [0.0, 2.0, 0.0],          # class 1
                     [0.0, 0.0, 3.0],          # class 2
                     [1.0, 1.0, 0.0]])         # class 0 (argmax takes the first of a tie)
    got = np.array([[1.0, 0.0, 0.0],           # same            cos 1
                    [0.0, 2.0, 0.0],           # same            cos 1
                    [0.0, 3.0, 3.0],           # argmax 1 ≠ 2    cos 3·3/(3·√18) = 1/√2
                    [1.0, 1.0, 0.0]])          # same            cos 1
    acc = accuracy.quantized(got, want, classifier=True)
    assert acc["top1_agreement"] == pytest.approx(3 / 4)
    assert acc["min_sample_cosine"] == pytest.approx(1 / math.sqrt(2))
    # whole-output cosine: dot = 1 + 4 + 9 + 2 = 16; |want|² = 1+4+9+2 = 16; |got|² = 1+4+18+2 = 25 → 16/(4·5)
    assert acc["cosine"] == pytest.approx(16 / 20)
    assert acc["pass"] is False and acc["samples"] == 4
    assert "top-1 75.0%" in accuracy.summary(acc)


def test_quantized_passes_at_cosine_0_99_and_text_models_have_no_top1():
    rng = np.random.default_rng(1)
    want = rng.standard_normal((8, 16, 4))
    got = want + 0.05 * rng.standard_normal(want.shape)     # cosine ≈ 1/√(1+0.05²) ≈ 0.99875
    acc = accuracy.quantized(got, want, classifier=False)
    assert acc["pass"] and 0.99 < acc["cosine"] < 0.9995 and "top1_agreement" not in acc
    assert accuracy.quantized(got * np.nan, want, False)["pass"] is False
    assert accuracy.quantized(got[:4], want, False)["pass"] is False          # shape mismatch is a failure


class _EchoContext:
    """Stands for an ExecutionContext of a fixed batch: output = input·2 and records the batch sizes it ran."""

    def __init__(self, batch):
        self.batch, self.seen = batch, []

    def run(self, feed):
        x = feed["input"]
        assert x.shape[0] == self.batch
        self.seen.append(x.shape[0])
        return {"output": x * 2}


@pytest.mark.parametrize("batch,calls", [(1, 6), (4, 2), (5, 2), (16, 1)])
def test_test_set_runs_in_chunks_of_the_engine_batch(batch, calls):
    xs = np.arange(6 * 3, dtype=np.float32).reshape(6, 3)
    ctx = _EchoContext(batch)
    out = precision_case.run_engine_on(ctx, xs, batch, "cpu")
    np.testing.assert_array_equal(out, xs * 2)                  # every sample once, in order, padding dropped
    assert len(ctx.seen) == calls


@pytest.mark.parametrize("batch,feeds", [(1, 32), (8, 4), (32, 1), (5, 7), (256, 1)])
def test_calibration_feeds_have_the_engine_batch_and_cover_the_set_distinct_from_the_test_set(batch, feeds):
    cal = precision_case.calibration_feeds("tiny_cnn", batch)
    assert len(cal) == feeds and all(f["input"].shape[0] == batch for f in cal)
    inputs = precision_case.calibration_inputs("tiny_cnn")
    assert len(inputs) == precision_case.CALIB_INPUTS == 32
    seen = {row.tobytes() for f in cal for row in f["input"]}
    assert seen == {row.tobytes() for row in inputs}                 # every calibration input, nothing else
    test = precision_case.test_inputs("tiny_cnn")
    assert test.shape[0] == precision_case.TEST_INPUTS == 64
    assert not seen & {row.tobytes() for row in test}


def test_an_option_build_does_not_take_is_not_run_and_an_unapplied_flag_is_caught(monkeypatch):
    import tensorforge as tfg

    def build(model, fp16=False, shapes=None, device=None, timing_cache=None, **export_options):
        raise AssertionError("not reached")
    monkeypatch.setattr(tfg, "build", build)
    assert precision_case.unsupported("int8") == "tfg.build() takes no 'int8' argument"
    assert precision_case.unsupported("fp16") is None

    class _Eng:
        class data:
            build_info = {"flags": ["fp16"]}
    assert "'int8' was not applied" in precision_case.applied(_Eng, "int8")
    _Eng.data.build_info = {"flags": ["fp16", "int8"]}
    assert precision_case.applied(_Eng, "int8") is None
