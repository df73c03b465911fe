"""bench/zoo_case.py's fp16 accuracy rule: 2e-2 of the reference's max and cosine ≥ 0.999, or within 1.5× of
PyTorch's own fp16 error on the same input; never a pass on a bad cosine."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
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


def test_within_the_fixed_tolerance_passes_on_its_own():
    acc = _case(1e-2, 1e-2)
    assert acc["pass"] and "passed_by" not in acc and acc["torch_fp16_rel_to_max"] == pytest.approx(1e-2)


def test_beyond_the_fixed_tolerance_passes_only_near_torch_fp16():
    assert _case(3.4e-2, 3.0e-2)["passed_by"].startswith("within 1.5×")
    assert _case(3.4e-2, 1.0e-2)["pass"] is False


def test_a_bad_cosine_never_passes():
    acc = _case(3.0e-2, 3.0e-2, cos_noise=0.5)
    assert acc["cosine"] < 0.999 and acc["pass"] is False
