"""Calibration algorithms: a histogram of |x| (or the running amax) → the amax a tensor is quantized with.

All histograms here are of |x| over [0, top) in `n` equal bins of width w = top / n (histogram.py builds them).
The scale written to the calibration cache is amax / 127 for INT8 (amax / 448 for FP8 E4M3).

- minmax:      amax = max |x|                                  (TensorRT's MinMaxCalibration)
- percentile:  amax = (k + 1)·w, k the first bin where the CDF reaches p/100       (p = 99.99 by default)
- legacy:      the quantile method of TensorRT 2.0's calibrator: percentile with p = 100·quantile
- entropy2:    TensorRT's EntropyCalibration2 (KL divergence): for every candidate i = levels … n kept bins,
               P = hist[:i] with the clipped mass hist[i:] added to P[i-1]; Q = hist[:i] merged into `levels`
               groups (group j = bins [⌊j·i/levels⌋, ⌊(j+1)·i/levels⌋)), each group's sum spread evenly over
               the bins of the group where P is non-zero; D(i) = Σ p·ln(p/q) over p > 0 of the normalised P, Q
               (a q of 0 where p > 0 is smoothed to ε = 1e-4 of the smallest non-zero q, renormalised).
               amax = i·w for the *last* i of minimal D (the widest range among equal divergences). Two guards:
               bin 0 counts as bin 1 does (the spike of exact zeros after a ReLU says nothing about the range),
               and a candidate that would clip more than 1 % of the values is not one (with few samples, P and Q
               both collapse into the last kept bin and D reads 0 at absurdly small ranges). When
               every value lies in the first `levels` bins nothing is clipped: amax = upper edge of the last
               non-empty bin (both versions).
- entropy:     EntropyCalibration (v1): the same divergence, amax = (i + ½)·w for the *first* minimal i.
`levels` is 128 for INT8 (the magnitudes one sign of int8 holds). Cost: O(n²) over n = 2048 bins, per tensor.
"""

import math

import numpy as np

INT8_LEVELS = 128
MAX_CLIPPED = 0.01          # a candidate may clip at most this share of the values
ALGORITHMS = ("entropy2", "entropy", "minmax", "percentile", "legacy")


def minmax_amax(amax: float) -> float:
    return float(amax)


def percentile_amax(hist: np.ndarray, width: float, percentile: float = 99.99) -> float:
    """Upper edge of the first bin where the cumulative share of |x| reaches `percentile` %."""
    total = float(hist.sum())
    if total == 0:
        return 0.0
    cdf = np.cumsum(hist, dtype=np.float64) / total
    k = int(np.searchsorted(cdf, percentile / 100.0 - 1e-12, side="left"))
    return float(min(k, len(hist) - 1) + 1) * width


def legacy_amax(hist: np.ndarray, width: float, quantile: float) -> float:
    return percentile_amax(hist, width, 100.0 * quantile)


def group_of_bins(i: int, levels: int) -> np.ndarray:
    """Group index of each of the first `i` bins: group j = bins [⌊j·i/levels⌋, ⌊(j+1)·i/levels⌋)."""
    edges = (np.arange(levels + 1) * i) // levels
    return np.searchsorted(edges, np.arange(i), side="right") - 1


def kl_divergence(hist: np.ndarray, i: int, levels: int) -> float:
    """D(P‖Q) for the candidate that keeps the first `i` bins (see the module docstring)."""
    kept = hist[:i].astype(np.float64)
    p = kept.copy()
    p[i - 1] += float(hist[i:].sum())
    if p.sum() == 0:
        return 0.0
    group = group_of_bins(i, levels)
    nonzero = p > 0
    sums = np.bincount(group, weights=kept, minlength=levels)
    counts = np.bincount(group, weights=nonzero.astype(np.float64), minlength=levels)
    q = np.where(nonzero, sums[group] / np.maximum(counts[group], 1.0), 0.0)
    p /= p.sum()
    if q.sum() == 0:
        return math.inf
    q /= q.sum()
    hole = nonzero & (q == 0)
    if hole.any():
        q[hole] = 1e-4 * q[q > 0].min()
        q /= q.sum()
    return float(np.sum(p[nonzero] * np.log(p[nonzero] / q[nonzero])))


def _xlogx(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x * np.log(np.where(x > 0, x, 1.0)), 0.0)


def kl_divergences(hist: np.ndarray, candidates: list[int], levels: int) -> np.ndarray:
    """kl_divergence for every candidate at once, in O(levels) per candidate from prefix sums (the same value).

    With T = Σ hist, P the clipped histogram (mass T) and Q constant (Qv_j = group sum / non-zero bins) on the P > 0
    bins of group j: D = Σ p ln p − Σ p ln q = (Σ P ln P)/T − ln T − (1/T)·Σ_j Pg_j ln(Qv_j / (Qtot·Z)), where Pg_j is
    group j's P mass, Qtot = Σ hist[:i] and Z = 1 + ε·(holes) the renormalisation after smoothing.
    """
    h = np.asarray(hist, np.float64)
    total = h.sum()
    S = np.concatenate([[0.0], np.cumsum(h)])
    N = np.concatenate([[0.0], np.cumsum(h > 0)])
    HL = np.concatenate([[0.0], np.cumsum(_xlogx(h))])
    i = np.asarray(candidates, np.int64)
    edges = (np.arange(levels + 1)[None, :] * i[:, None]) // levels            # [C, levels+1]
    sums = S[edges[:, 1:]] - S[edges[:, :-1]]
    counts = N[edges[:, 1:]] - N[edges[:, :-1]]
    tail = total - S[i]
    extra = (h[i - 1] == 0) & (tail > 0)                # bin i-1 is non-zero in P only through the clipped mass
    counts[:, -1] += extra
    pg = sums.copy()
    pg[:, -1] += tail
    qtot = S[i]
    qv = np.where(counts > 0, sums / np.maximum(counts, 1.0), 0.0)
    regular = (counts > 0) & (sums > 0)
    hole = (counts > 0) & (sums == 0)
    qmin = np.where(regular, qv, np.inf).min(axis=1) / np.where(qtot > 0, qtot, 1.0)
    eps = 1e-4 * qmin
    z = 1.0 + eps * hole.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_q = np.where(regular, np.log(np.where(regular, qv, 1.0)) - np.log(np.where(qtot > 0, qtot, 1.0))[:, None], 0.0)
        plogq = (pg * regular * log_q).sum(axis=1) + (pg * hole).sum(axis=1) * np.log(np.where(eps > 0, eps, 1.0))
    plogq = (plogq - total * np.log(z)) / total
    plogp = (HL[i - 1] + _xlogx(h[i - 1] + tail)) / total - np.log(total)
    return np.where(qtot > 0, plogp - plogq, np.inf)


def entropy_amax(hist: np.ndarray, width: float, levels: int = INT8_LEVELS, version: int = 2,
                 max_clipped: float = MAX_CLIPPED) -> float:
    """The KL-minimising clipping threshold; version 2 = EntropyCalibration2, 1 = EntropyCalibration."""
    hist = np.asarray(hist, np.float64).copy()
    n = len(hist)
    if hist.sum() == 0:
        return 0.0
    last_nonzero = int(np.nonzero(hist)[0][-1]) + 1
    if last_nonzero <= levels:           # every value fits in `levels` bins: nothing to clip
        return float(last_nonzero) * width
    if n > 1:
        hist[0] = hist[1]                # the spike of exact zeros (ReLU outputs) says nothing about the range
    total = hist.sum()
    tail = total - np.cumsum(hist)       # tail[i-1] = mass above the first i bins
    candidates = [i for i in range(levels, n + 1) if tail[i - 1] <= max_clipped * total]
    divergences = list(zip(candidates, kl_divergences(hist, candidates, levels).tolist()))
    best = min(d for _, d in divergences)
    ties = [i for i, d in divergences if d <= best + 1e-12]
    if version == 2:
        return float(ties[-1]) * width
    return (ties[0] + 0.5) * width


def amax_for(algorithm: str, amax: float, hist: np.ndarray | None, width: float, *, levels: int = INT8_LEVELS,
             percentile: float = 99.99, quantile: float = 0.9999) -> float:
    """Dispatch by algorithm name (ALGORITHMS); never returns more than the observed max |x|."""
    if algorithm == "minmax" or hist is None or amax == 0:
        return minmax_amax(amax)
    if algorithm == "percentile":
        out = percentile_amax(hist, width, percentile)
    elif algorithm == "legacy":
        out = legacy_amax(hist, width, quantile)
    elif algorithm in ("entropy", "entropy2"):
        out = entropy_amax(hist, width, levels, 2 if algorithm == "entropy2" else 1)
    else:
        raise ValueError(f"unknown calibration algorithm {algorithm!r}")
    return float(min(out, amax)) if out > 0 else float(amax)
