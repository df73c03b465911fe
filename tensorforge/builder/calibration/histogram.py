"""Collectors of tensor statistics over the calibration batches: running ranges and |x| histograms.

    RangeCollector.update(name, x)      min, max and amax = max |x| per tensor (pass 1 of calibration)
    HistogramCollector(tops, bins)      |x| counted in `bins` equal bins over [0, top) per tensor (pass 2);
                                        top is the tensor's amax from pass 1, so no value falls outside

Both reduce on the tensor's own device (one read of x per update) and keep a few numbers per tensor on the
host. NaN and ±inf are ignored (a tensor that holds them still gets a range from its finite values).
"""

from dataclasses import dataclass, field

import numpy as np
import torch

DEFAULT_BINS = 2048


@dataclass
class TensorRange:
    min: float = float("inf")
    max: float = float("-inf")

    @property
    def amax(self) -> float:
        if self.min > self.max:
            return 0.0
        return max(abs(self.min), abs(self.max))


@dataclass
class RangeCollector:
    ranges: dict[str, TensorRange] = field(default_factory=dict)

    def update(self, name: str, x: torch.Tensor) -> None:
        if x.numel() == 0 or not x.dtype.is_floating_point:
            return
        finite = x.detach().float()
        finite = finite[torch.isfinite(finite)]
        if finite.numel() == 0:
            return
        lo, hi = torch.aminmax(finite)
        r = self.ranges.setdefault(name, TensorRange())
        r.min, r.max = min(r.min, float(lo)), max(r.max, float(hi))


class HistogramCollector:
    def __init__(self, tops: dict[str, float], bins: int = DEFAULT_BINS):
        self.tops, self.bins = dict(tops), int(bins)
        self.hists: dict[str, np.ndarray] = {}

    def width(self, name: str) -> float:
        return self.tops[name] / self.bins

    def update(self, name: str, x: torch.Tensor) -> None:
        top = self.tops.get(name, 0.0)
        if top <= 0 or x.numel() == 0 or not x.dtype.is_floating_point:
            return
        a = x.detach().float().abs()
        a = a[torch.isfinite(a)]
        h = torch.histc(a, bins=self.bins, min=0.0, max=float(top)).cpu().double().numpy()
        if name in self.hists:
            self.hists[name] += h
        else:
            self.hists[name] = h
