"""Which profile point's kernels run a call: the point (min, opt, max of the first profile) nearest the call's input
shapes, by the summed |log volume| distance over the inputs (ties go to opt, then min).

    d(p) = Σ_inputs | ln(∏ shape) − ln(∏ shape_p) |          choose argmin_p d(p)

For a batch range 1..8..32 the boundaries fall at the geometric means √8 ≈ 2.8 and √256 = 16 (a tie goes to opt):
batches 1–2 run min's kernels, 3–16 opt's, 17–32 max's. Computed once per input-shape signature (a dict lookup per call after that); a CUDA graph captured for
a signature holds that point's kernels. Only layers with `point_tactics` (builder/point_tactics.py) differ between
the points' programs.
"""

import math

ORDER = (("opt", 1), ("min", 0), ("max", 2))


def _log_volume(shape) -> float:
    return sum(math.log(max(1, int(d))) for d in shape)


def nearest_point(profile: dict, shapes: dict) -> str:
    """'min', 'opt' or 'max': the point of `profile` (name → (min, opt, max)) nearest `shapes` (name → shape)."""
    best, best_d = "opt", math.inf
    for label, k in ORDER:
        d = sum(abs(_log_volume(shapes[n]) - _log_volume(points[k])) for n, points in profile.items() if n in shapes)
        if d < best_d - 1e-9:
            best, best_d = label, d
    return best


def point_programs(program: list, alternatives: dict[str, dict[int, object]]) -> dict[str, list]:
    """The opt program and, per other point, the same program with that point's kernels swapped in (by layer index)."""
    out = {"opt": program}
    for label, kernels in alternatives.items():
        if kernels:
            out[label] = [(i, kernels.get(i, k), *rest) for i, k, *rest in program]
    return out
