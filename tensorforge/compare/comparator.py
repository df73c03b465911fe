"""Compare one output of two runners: error statistics, a histogram, and pass/fail as Polygraphy decides it.

For got `g` and reference `r` (both widened to float64), per element

    abs = |g − r|        rel = abs / |r|   (0 where abs = 0, +inf where r = 0 and abs > 0)
    fails  ⇔  abs > atol  AND  rel > rtol      ⇔  abs > max(atol, rtol·|r|)

so an element passes when it is within EITHER tolerance (numpy's allclose would instead add them).
NaN in both at the same place counts as equal, NaN in one only as an infinite error; equal infinities are equal.
Memory traffic: a few float64 temporaries of the output's size; histograms are 10 bins by default.
"""

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Histogram:
    edges: list[float]           # len(counts) + 1 bin edges, linear from 0 to the largest finite error
    counts: list[int]
    infinite: int = 0            # elements whose error is +inf (NaN mismatch, or rel error against a zero)

    def lines(self, width: int = 30) -> list[str]:
        peak = max(self.counts + [self.infinite, 1])
        rows = [(f"[{lo:.3g}, {hi:.3g})", n) for lo, hi, n in zip(self.edges, self.edges[1:], self.counts)]
        if self.infinite:
            rows.append(("inf", self.infinite))
        pad = max(len(label) for label, _ in rows)
        return [f"{label:<{pad}} | {'#' * round(width * n / peak):<{width}} {n}" for label, n in rows]


@dataclass
class OutputComparison:
    """The verdict and statistics for one tensor compared between a runner and the reference runner."""
    name: str
    passed: bool
    reason: str = ""                         # why it failed, in words
    shape: tuple = ()
    ref_shape: tuple = ()
    dtype: str = ""
    ref_dtype: str = ""
    total: int = 0
    failed: int = 0
    max_abs: float = 0.0
    mean_abs: float = 0.0
    median_abs: float = 0.0
    max_rel: float = 0.0
    mean_rel: float = 0.0
    median_rel: float = 0.0
    worst_index: tuple = ()                  # where the largest absolute error is
    worst_got: float = 0.0
    worst_ref: float = 0.0
    abs_hist: Histogram | None = None
    rel_hist: Histogram | None = None
    atol: float = 0.0
    rtol: float = 0.0
    extra: dict = field(default_factory=dict)

    def summary(self) -> str:
        if self.reason and not self.total:
            return f"{self.name}: FAILED: {self.reason}"
        verdict = "PASSED" if self.passed else "FAILED"
        return (f"{self.name}: {verdict}: {self.failed} of {self.total} elements exceed atol={self.atol:g} and "
                f"rtol={self.rtol:g}; max abs {self.max_abs:.4g}, max rel {self.max_rel:.4g}")

    def lines(self) -> list[str]:
        out = [self.summary()]
        if not self.total:
            return out
        out.append(f"    abs error: max {self.max_abs:.4g} at {self.worst_index} (got {self.worst_got:.6g}, "
                   f"reference {self.worst_ref:.6g}), mean {self.mean_abs:.4g}, median {self.median_abs:.4g}")
        out.append(f"    rel error: max {self.max_rel:.4g}, mean {self.mean_rel:.4g}, median {self.median_rel:.4g}")
        if self.abs_hist is not None and self.max_abs > 0:
            out.append("    histogram of abs error:")
            out.extend("      " + line for line in self.abs_hist.lines())
        return out

    def to_json(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k not in ("abs_hist", "rel_hist")}
        d["shape"], d["ref_shape"], d["worst_index"] = list(self.shape), list(self.ref_shape), list(self.worst_index)
        for key in ("abs_hist", "rel_hist"):
            h = getattr(self, key)
            d[key] = None if h is None else {"edges": h.edges, "counts": h.counts, "infinite": h.infinite}
        return d


def histogram(values: np.ndarray, bins: int = 10) -> Histogram:
    """Linear bins from 0 to the largest finite value; +inf values are counted apart."""
    finite = values[np.isfinite(values)]
    top = float(finite.max()) if finite.size else 0.0
    if top <= 0:
        return Histogram([0.0, 0.0], [int(finite.size)], int(values.size - finite.size))
    counts, edges = np.histogram(finite, bins=bins, range=(0.0, top))
    return Histogram([float(e) for e in edges], [int(c) for c in counts], int(values.size - finite.size))


def _as_float(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) if a.dtype != np.bool_ else a.astype(np.int8).astype(np.float64)


def compare_arrays(name: str, got, ref, atol: float = 1e-5, rtol: float = 1e-5, bins: int = 10,
                   check_dtype: bool = True) -> OutputComparison:
    """Compare `got` against the reference `ref` elementwise (see the module docstring for the rule)."""
    got, ref = np.asarray(got), np.asarray(ref)
    result = OutputComparison(name, False, shape=tuple(got.shape), ref_shape=tuple(ref.shape), dtype=str(got.dtype),
                              ref_dtype=str(ref.dtype), atol=atol, rtol=rtol)
    if got.shape != ref.shape:
        result.reason = f"shape {tuple(got.shape)} differs from the reference's {tuple(ref.shape)}"
        return result
    if check_dtype and got.dtype != ref.dtype:
        result.reason = f"dtype {got.dtype} differs from the reference's {ref.dtype}"
        return result
    g, r = _as_float(got).reshape(-1), _as_float(ref).reshape(-1)
    same = (g == r) | (np.isnan(g) & np.isnan(r))
    with np.errstate(invalid="ignore", over="ignore"):
        absdiff = np.where(same, 0.0, np.abs(g - r))
    absdiff = np.where(np.isnan(absdiff), np.inf, absdiff)        # NaN on one side only, or inf − finite
    mag = np.abs(r)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(absdiff == 0, 0.0, np.where(mag > 0, absdiff / np.where(mag > 0, mag, 1.0), np.inf))
    rel = np.where(np.isinf(absdiff) | np.isnan(rel), np.inf, rel)    # inf vs −inf, NaN references
    bad = (absdiff > atol) & (rel > rtol)
    result.total, result.failed = int(g.size), int(bad.sum())
    result.passed = result.failed == 0
    if not result.passed:
        result.reason = f"{result.failed} of {result.total} elements exceed both atol={atol:g} and rtol={rtol:g}"
    if g.size:
        worst = int(np.argmax(absdiff))
        result.worst_index = tuple(int(i) for i in np.unravel_index(worst, got.shape)) if got.ndim else ()
        result.worst_got, result.worst_ref = float(g[worst]), float(r[worst])
        result.max_abs, result.mean_abs = float(absdiff.max()), float(absdiff.mean())
        result.median_abs = float(np.median(absdiff))
        result.max_rel, result.mean_rel, result.median_rel = float(rel.max()), float(rel.mean()), float(np.median(rel))
        result.abs_hist, result.rel_hist = histogram(absdiff, bins), histogram(rel, bins)
    return result


def compare_outputs(got: dict, ref: dict, atol: float = 1e-5, rtol: float = 1e-5,
                    names: list[str] | None = None) -> list[OutputComparison]:
    """Compare every output of the reference (or `names`); an output missing from `got` fails with that reason."""
    out = []
    for name in names if names is not None else list(ref):
        if name not in got:
            out.append(OutputComparison(name, False, reason="the runner did not produce this output"))
        else:
            out.append(compare_arrays(name, got[name], ref[name], atol, rtol))
    return out
