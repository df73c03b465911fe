"""Calibration algorithms and collectors against histograms and divergences computed by hand in the test."""

import math

import numpy as np
import pytest
import torch

from tensorforge.builder.calibration.algorithms import amax_for, entropy_amax, kl_divergence, percentile_amax
from tensorforge.builder.calibration.histogram import HistogramCollector, RangeCollector


def test_range_collector_tracks_min_max_and_amax_over_batches():
    r = RangeCollector()
    r.update("t", torch.tensor([-3.0, 1.0, 2.0]))
    r.update("t", torch.tensor([0.5, 2.5, float("nan"), float("inf")]))     # non-finite values are ignored
    assert (r.ranges["t"].min, r.ranges["t"].max, r.ranges["t"].amax) == (-3.0, 2.5, 3.0)
    r.update("i", torch.tensor([5, 7]))                                      # integer tensors have no range
    assert "i" not in r.ranges


def test_histogram_of_abs_values_by_hand():
    # |x| = .1 .3 .6 .9 1.0 over [0, 1) in 4 bins of 0.25: [.1] [.3] [.6] [.9, 1.0 (top goes in the last bin)]
    h = HistogramCollector({"t": 1.0}, bins=4)
    h.update("t", torch.tensor([0.1, -0.3, 0.6]))
    h.update("t", torch.tensor([-0.9, 1.0]))
    assert h.hists["t"].tolist() == [1.0, 1.0, 1.0, 2.0]
    assert h.width("t") == 0.25


def test_percentile_is_the_upper_edge_of_the_bin_where_the_cdf_crosses():
    hist = np.array([5.0, 3.0, 1.0, 1.0])          # CDF .5 .8 .9 1.0, bins of 0.5
    assert percentile_amax(hist, 0.5, 85.0) == 1.5   # first CDF ≥ .85 is bin 2 → (2+1)·0.5
    assert percentile_amax(hist, 0.5, 50.0) == 0.5
    assert percentile_amax(hist, 0.5, 100.0) == 2.0
    assert amax_for("legacy", 2.0, hist, 0.5, quantile=0.85) == 1.5


def _kl(p, q):
    p = [v / sum(p) for v in p]
    q = [v / sum(q) for v in q]
    return sum(a * math.log(a / b) for a, b in zip(p, q) if a > 0)


def test_kl_divergence_of_each_candidate_by_hand():
    hist = np.array([4.0, 2.0, 0.0, 1.0])           # 4 bins, 2 quantization levels
    # i=2: P=[4, 2+0+1], Q: groups {0},{1} → [4, 2]
    # i=3: P=[4, 2, 0+1], groups {0},{1,2}: bin 1 and 2 share 2 over the two bins where P>0 → Q=[4, 1, 1]
    # i=4: P=[4, 2, 0, 1], groups {0,1},{2,3}: 6 over 2 bins, 1 over the one bin where P>0 → Q=[3, 3, 0, 1]
    expect = {2: _kl([4, 3], [4, 2]), 3: _kl([4, 2, 1], [4, 1, 1]), 4: _kl([4, 2, 0, 1], [3, 3, 0, 1])}
    for i, d in expect.items():
        assert kl_divergence(hist, i, 2) == pytest.approx(d, rel=1e-12)


def test_entropy_threshold_by_hand():
    # bin 0 is first replaced by bin 1's count: [9, 2, 0, 1] → [2, 2, 0, 1]; total 5; clipping is capped at 1 %,
    # so only i=4 would qualify — allow all clipping here (max_clipped=1) to compare the three candidates:
    # i=2: P=[2,3] Q=[2,2];  i=3: P=[2,2,1] Q=[2,1,1];  i=4: P=[2,2,0,1] Q=[2,2,0,1] (D=0)
    hist = np.array([9.0, 2.0, 0.0, 1.0])
    d = {2: _kl([2, 3], [2, 2]), 3: _kl([2, 2, 1], [2, 1, 1]), 4: 0.0}
    assert min(d, key=d.get) == 4
    assert entropy_amax(hist, 1.0, levels=2, version=2, max_clipped=1.0) == 4.0
    assert entropy_amax(hist, 1.0, levels=2, version=1, max_clipped=1.0) == 4.5
    assert kl_divergence(np.array([2.0, 2.0, 0.0, 1.0]), 3, 2) == pytest.approx(d[3], rel=1e-12)
    hist2 = np.array([1.0, 1.0, 1.0, 2.0, 4.0, 0.0, 0.0, 0.0])   # i=4 clips 4/9 > 1 %: only i ≥ 5 are candidates
    assert entropy_amax(hist2, 1.0, levels=4) >= 5.0


def test_entropy_clips_rare_outliers_of_a_gaussian():
    # 200k N(0,1) samples and 20 values near 40σ: min-max keeps 40, the KL threshold keeps the bulk (TensorRT's
    # motivation for entropy calibration). Bins: 2048 over [0, max|x|), 128 levels.
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(200_000, generator=g), 40.0 + torch.rand(20, generator=g)])
    r = RangeCollector()
    r.update("x", x)
    top = r.ranges["x"].amax
    h = HistogramCollector({"x": top})
    h.update("x", x)
    amax = amax_for("entropy2", top, h.hists["x"], h.width("x"))
    assert top > 40.0 and 3.0 < amax < 10.0, amax


def test_everything_within_the_levels_is_not_clipped():
    hist = np.array([3.0, 0.0, 2.0, 0.0, 0.0, 0.0])     # last non-empty bin is 2, levels 4
    assert entropy_amax(hist, 0.5, levels=4) == 1.5       # upper edge of bin 2


def test_minmax_and_clamping_to_the_observed_max():
    assert amax_for("minmax", 3.0, None, 0.0) == 3.0
    hist = np.array([0.0, 0.0, 0.0, 1.0])
    assert amax_for("percentile", 0.9, hist, 0.25, percentile=100.0) == 0.9    # edge 1.0 clamped to max 0.9


def test_prefix_sum_divergences_equal_the_per_candidate_formula():
    from tensorforge.builder.calibration.algorithms import kl_divergences
    rng = np.random.default_rng(3)
    for _ in range(10):
        n = int(rng.integers(130, 600))
        hist = rng.poisson(rng.random(n) * 4 * (rng.random(n) < 0.6)).astype(float)
        hist[-1] += 1.0
        cands = list(range(128, n + 1))
        fast = kl_divergences(hist, cands, 128)
        slow = np.array([kl_divergence(hist, i, 128) for i in cands])
        assert np.array_equal(np.isinf(fast), np.isinf(slow))
        ok = np.isfinite(slow)
        np.testing.assert_allclose(fast[ok], slow[ok], rtol=1e-5, atol=1e-9)
