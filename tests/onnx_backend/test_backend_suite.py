"""The ONNX backend test suite (onnx.backend.test.BackendTest) through tensorforge.backend.

Every case runs the real path: parse → passes → build → engine file → load → run, then the suite's own
comparison (rtol 1e-3, atol 1e-7 unless `tolerances.py` says otherwise for that one case, exact dtypes
and shapes). `exclusions.txt` lists the cases left out, each with its reason; `known_failures.txt` the
cases expected to fail for now (an unexpected pass fails the run). conftest.py prints the
number of passing CPU cases and fails the run when a full run passes fewer than MIN_PASSING.
Run: .venv/bin/python -m pytest -q tests/onnx_backend
"""

import onnx.backend.test

from tensorforge.backend import TensorforgeBackend

from suite_config import KNOWN_FAILURES, load_exclusions
from tolerances import TOLERANCES

_suite = onnx.backend.test.BackendTest(TensorforgeBackend, __name__, test_kwargs=TOLERANCES)
for _pattern, _reason in load_exclusions():
    _suite.exclude(_pattern)
for _pattern, _reason in load_exclusions(KNOWN_FAILURES):
    _suite.xfail(_pattern)

globals().update(_suite.test_cases)
