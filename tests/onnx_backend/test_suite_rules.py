"""The suite's own rules: when MIN_PASSING applies (suite_config.is_full_run), and the spec overrides of the
float → 2/4-bit Cast cases (spec_overrides.py) against hand-computed values from the ONNX spec's rule."""

from types import SimpleNamespace

import ml_dtypes
import numpy as np

import spec_overrides
from suite_config import is_full_run


def test_full_run_whatever_the_case_count():
    assert is_full_run(1900, 0, ["tests"])                        # fewer cases (another onnx): still full
    assert is_full_run(2100, 0, ["tests/onnx_backend"])
    assert not is_full_run(60, 3946, ["tests/onnx_backend"])      # -k deselected some
    assert not is_full_run(1, 0, ["tests/onnx_backend/test_backend_suite.py::OnnxBackendNodeModelTest::test_abs_cpu"])
    assert not is_full_run(0, 0, ["tests"])                        # suite not selected at all
    assert not is_full_run(2033, 0, ["tests"], collect_only=True)


def test_spec_rule_by_hand():
    x = np.array([-9, -8.5, -3, 2.5, 3.5, 7.6, 8, 16, -0.4], np.float32)
    assert spec_overrides.spec_cast_to_subbyte(x, "INT4").astype(np.int64).tolist() == [7, -8, -3, 2, 4, -8, -8, 0, 0]
    assert spec_overrides.spec_cast_to_subbyte(x, "UINT4").astype(np.int64).tolist() == [7, 8, 13, 2, 4, 8, 8, 0, 0]
    assert spec_overrides.spec_cast_to_subbyte(x, "INT2").astype(np.int64).tolist() == [-1, 0, 1, -2, 0, 0, 0, 0, 0]
    assert spec_overrides.spec_cast_to_subbyte(x, "UINT2").astype(np.int64).tolist() == [3, 0, 1, 2, 0, 0, 0, 0, 0]


def test_apply_replaces_only_what_departs_from_the_spec(monkeypatch):
    monkeypatch.setattr(spec_overrides, "OVERRIDDEN", [])
    x = np.arange(-9, 16).astype(np.float32)
    right = spec_overrides.spec_cast_to_subbyte(x, "INT4")
    wrong = np.where((x < -8) | (x > 7), 0, x).astype(np.int64).astype(ml_dtypes.int4)    # ml_dtypes 0.7's choice
    cases = [SimpleNamespace(name="test_cast_FLOAT_to_INT4", data_sets=[([x], [wrong])]),
             SimpleNamespace(name="test_castlike_FLOAT_to_INT4_expanded", data_sets=[([x, right[:1]], [right])]),
             SimpleNamespace(name="test_cast_FLOAT_to_INT8", data_sets=[([x], [wrong])])]
    assert spec_overrides.apply(cases) == ["test_cast_FLOAT_to_INT4"]
    np.testing.assert_array_equal(cases[0].data_sets[0][1][0].astype(np.int64), right.astype(np.int64))
    assert cases[0].data_sets[0][1][0].dtype == ml_dtypes.int4
    assert cases[2].data_sets[0][1][0] is wrong                                           # not a sub-byte target


def test_float4_spec_rule_by_hand():
    """technical/float4.md's table: RNE on {0, .5, 1, 1.5, 2, 3, 4, 6} (ties to the even code), ±6 beyond,
    ±Inf → ±6, NaN → +6 (code 7), -0 → -0 (code 8)."""
    x = np.array([0.48, 0.25, 1.05, -3.5, -8, 9, 1e6, 1e-7, np.nan, np.inf, -np.inf, -4, 0.01, -0.0, 2.5, 5.0],
                 np.float32)
    codes = spec_overrides.spec_cast_to_float4(x).view(np.uint8).tolist()
    assert codes == [1, 0, 2, 14, 15, 7, 7, 0, 7, 7, 15, 14, 0, 8, 4, 6]
