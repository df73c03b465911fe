"""bench/accuracy.py's fp16 rule: 2e-2 of the reference's max and cosine ≥ 0.999, or within 1.5× of PyTorch's own
fp16 error on the same input; never a pass on a bad cosine; the clause that passed is named."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
accuracy = pytest.importorskip("accuracy")
zoo_case = pytest.importorskip("zoo_case")


def _case(rel_engine, rel_torch, cos_noise=0.0):
    rng = np.random.default_rng(0)
    want = rng.standard_normal(1000)
    scale = np.abs(want).max()
    spike = np.zeros(1000)
    spike[3] = 1.0
    got = want + rel_engine * scale * spike + cos_noise * rng.standard_normal(1000)
    peer = want + rel_torch * scale * spike
    acc = zoo_case.compare(got, want, True)
    zoo_case.judge_against_torch_fp16(acc, zoo_case.compare(peer, want, True))
    return acc


def test_within_the_fixed_tolerance_passes_by_the_first_clause():
    acc = _case(1e-2, 1e-2)
    assert acc["pass"] and acc["passed_by"] == accuracy.CLAUSE_FIXED == "≤2e-2 of max & cos≥0.999"
    assert acc["torch_fp16_rel_to_max"] == pytest.approx(1e-2) and acc["rel_to_max"] == pytest.approx(1e-2)
    assert "[≤2e-2 of max & cos≥0.999]" in accuracy.summary(acc)


def test_beyond_the_fixed_tolerance_passes_only_near_torch_fp16():
    acc = _case(3.4e-2, 3.0e-2)                     # 3.4e-2 ≤ 1.5 × 3.0e-2 = 4.5e-2
    assert acc["pass"] and acc["passed_by"] == accuracy.CLAUSE_TORCH == "≤1.5× torch fp16 error"
    assert "[≤1.5× torch fp16 error]" in accuracy.summary(acc)
    acc = _case(3.4e-2, 2.2e-2)                     # 1.5 × 2.2e-2 = 3.3e-2 < 3.4e-2
    assert acc["pass"] is False and "passed_by" not in acc and accuracy.summary(acc).startswith("FAIL")


def test_a_bad_cosine_never_passes():
    acc = _case(3.0e-2, 3.0e-2, cos_noise=0.5)
    assert acc["cosine"] < 0.999 and acc["pass"] is False


def test_strict_fp32_is_numpys_allclose_and_reports_the_errors():
    want = np.array([1.0, -2.0, 1e-5, 0.5])
    # allowance per element: 1e-4 + 1e-3·|want| = 1.1e-3, 2.1e-3, 1.00001e-4, 6e-4
    ok = want + np.array([1.0e-3, -2.0e-3, 9e-5, 0.0])
    acc = accuracy.strict_fp32(ok, want)
    assert acc["pass"] and acc["max_abs_err"] == pytest.approx(2.0e-3)
    assert acc["max_rel_err"] == pytest.approx(1e-3)                     # 1e-3/1 and 2e-3/2; 1e-5 is below 1e-3
    # error / allowance: 1e-3/1.1e-3 = 0.909, 2e-3/2.1e-3 = 0.952, 9e-5/1.00001e-4 = 0.900, 0 → the worst is 0.952
    assert acc["max_err_over_tolerance"] == pytest.approx(2e-3 / 2.1e-3)
    bad = want + np.array([0.0, 0.0, 0.0, 7e-4])                          # 7e-4 > 6e-4
    acc = accuracy.strict_fp32(bad, want)
    assert acc["pass"] is False and acc["max_err_over_tolerance"] == pytest.approx(7e-4 / 6e-4)
    assert np.allclose(ok, want, rtol=1e-3, atol=1e-4) and not np.allclose(bad, want, rtol=1e-3, atol=1e-4)
    assert accuracy.summary(acc).startswith("FAIL (max abs 7.0e-04")
