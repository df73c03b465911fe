"""The model-level comparisons of tests/models, as functions the tests and the mutation test both call.

    check_light("resnet50", tmp_path)       # re-seeded light model: input-dependent, tensorforge vs onnxruntime
    input_sensitivity(y0, y1, rtol, atol)   # max |y0 − y1| / (atol + rtol·|y1|): how far apart two inputs' outputs are

Each check raises AssertionError when tensorforge's output differs from the oracle (onnxruntime on the same
model) beyond rtol/atol; tests/models/test_mutation.py breaks one tactic on purpose and asserts that it does.
"""

import numpy as np
import onnx

from light_reseed import LIGHT, light_input, reseeded
from oracle import assert_close, ort_run

import tensorforge as tfg

RTOL, ATOL = 1e-3, 1e-4
MIN_SENSITIVITY = 100.0      # two inputs' outputs must differ by ≥ 100× the tolerance somewhere


def input_sensitivity(y0: np.ndarray, y1: np.ndarray, rtol=RTOL, atol=ATOL) -> float:
    return float(np.max(np.abs(y0 - y1) / (atol + rtol * np.abs(y1))))


def check_light(name: str, tmp_path=None) -> "tfg.Engine":
    """Build the re-seeded light model on the CPU, run it on two inputs, compare with onnxruntime on the same
    model; save → load → compare again when `tmp_path` is given. The two inputs' oracle outputs must differ by at
    least MIN_SENSITIVITY× the tolerance, so a constant output cannot pass."""
    original = onnx.load(str(LIGHT / f"light_{name}.onnx"))       # the small file: only the input's name and shape
    model_bytes = reseeded(name)
    feeds = [light_input(original, seed) for seed in (0, 1)]
    want = [ort_run(model_bytes, f) for f in feeds]
    (out,) = want[0]
    sensitivity = input_sensitivity(want[0][out], want[1][out])
    assert sensitivity >= MIN_SENSITIVITY, f"{name}: the output hardly depends on the input ({sensitivity:.1f}× tol)"
    engine = tfg.build(model_bytes, device="cpu")
    for i, (f, w) in enumerate(zip(feeds, want)):
        assert_close(engine.run(dict(f)), w, RTOL, ATOL, what=f"{name} input {i}: ")
    if tmp_path is not None:
        path = tmp_path / f"{name}.engine"
        engine.save(path)
        reloaded = tfg.load(path, device="cpu")
        assert_close(reloaded.run(dict(feeds[1])), want[1], RTOL, ATOL, what=f"{name} reloaded: ")
    return engine
