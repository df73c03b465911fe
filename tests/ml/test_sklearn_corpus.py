"""Real classic-ML models (tests/ml/corpus.py: scikit-learn, LightGBM, converted by skl2onnx / onnxmltools) built
and run by tensorforge, compared with onnxruntime: labels exactly, scores at rtol 1e-5 (atol 1e-5: onnxruntime sums SVM kernels in float32, tensorforge in float64, and
near-zero decision values of large-magnitude terms differ by ~1e-6) — also after save/load."""

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("skl2onnx")

from oracle import check_against_ort  # noqa: E402

import corpus  # noqa: E402


def _shapes(x):
    return {"X": ((1, x.shape[1]), x.shape, x.shape)}


@pytest.mark.parametrize("name", corpus.NAMES)
def test_model_matches_onnxruntime(name):
    if name.startswith("lightgbm"):
        pytest.importorskip("lightgbm")
        pytest.importorskip("onnxmltools")
    onx, x = corpus.model(name)
    check_against_ort(onx, {"X": x}, rtol=1e-5, atol=1e-5, shapes=_shapes(x))
