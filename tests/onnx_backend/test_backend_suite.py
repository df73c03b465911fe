"""The ONNX backend test suite (onnx.backend.test.BackendTest) through tensorforge.backend.

Every case runs the real path: parse → passes → build → engine file → load → run, then the suite's own
comparison (rtol 1e-3, atol 1e-7 unless `tolerances.py` says otherwise for that one case, exact dtypes
and shapes); where a case's expected data comes from a library's conversion that departs from the ONNX
spec, `spec_overrides.py` replaces it with the spec's (and says so). `exclusions.txt` lists the cases left
out, each with its reason; `known_failures.txt` the cases expected to fail for now (an unexpected pass fails
the run). conftest.py prints the number of passing CPU cases and fails the run when a full run passes fewer
than MIN_PASSING; `bash scripts/backend_suite.sh` runs the suite alone and records the counts in results.json.
Run: .venv/bin/python -m pytest -q tests/onnx_backend
"""

import onnx.backend.test
from onnx.backend.test.loader import load_model_tests

from tensorforge.backend import TensorforgeBackend

import spec_overrides
from suite_config import KNOWN_FAILURES, load_exclusions
from tolerances import TOLERANCES

_suite = onnx.backend.test.BackendTest(TensorforgeBackend, __name__, test_kwargs=TOLERANCES)
spec_overrides.apply(load_model_tests(kind="node"))      # the node cases the suite just registered (same objects)
for _pattern, _reason in load_exclusions():
    _suite.exclude(_pattern)
for _pattern, _reason in load_exclusions(KNOWN_FAILURES):
    _suite.xfail(_pattern)

globals().update(_suite.test_cases)
