"""Calibration: run the float32 network over the calibration batches and turn every tensor's range into an amax.

Entry point: `calibrate(net, feeds, device, settings) -> {tensor name: amax}` (network inputs first, then layer
outputs in execution order: the order the cache is written in). The network runs layer by layer through the IR
references on the build device (the fp32 semantics every tactic is tested against), each tensor dropped after its
last reader, so memory stays near one activation set. Pass 1 records min/max; the histogram algorithms run a
second pass that counts |x| into `bins` bins over [0, amax) (histogram.py) and choose the amax (algorithms.py).
Traffic: per batch and pass, one fp32 forward plus one read of every float activation.
"""

from dataclasses import dataclass
from typing import Callable, Iterable

import torch

from ...ir import Network
from ...ir.interpret import run_reference
from ...util.errors import BuildError
from ...util.log import get_logger
from .algorithms import ALGORITHMS, INT8_LEVELS, amax_for
from .histogram import DEFAULT_BINS, HistogramCollector, RangeCollector


@dataclass
class CalibrationSettings:
    algorithm: str = "entropy2"
    bins: int = DEFAULT_BINS
    levels: int = INT8_LEVELS
    percentile: float = 99.99
    quantile: float = 0.9999


def _last_use(net: Network) -> dict[str, int]:
    last = {}
    for k, layer in enumerate(net.layers):
        for i in layer.inputs:
            if i:
                last[i] = k
    for o in net.outputs:
        last[o] = len(net.layers)
    return last


def forward(net: Network, feed: dict[str, torch.Tensor], device: torch.device,
            visit: Callable[[str, torch.Tensor], None], constants: dict | None = None) -> None:
    """Run `net` on `feed` with the references on `device`, calling visit(name, tensor) for every float tensor."""
    env = dict(constants) if constants is not None else {k: v.to(device) for k, v in net.constants.items()}
    last = _last_use(net)
    for name in net.inputs:
        if name not in feed:
            raise BuildError(f"a calibration batch has no value for input {name!r}",
                             f"give every input ({', '.join(net.inputs)}) in each batch")
        env[name] = torch.as_tensor(feed[name]).to(device)
        if env[name].dtype.is_floating_point:
            visit(name, env[name])
    for k, layer in enumerate(net.layers):
        ins = [env[i] if i else None for i in layer.inputs]
        try:
            with torch.no_grad():
                outs = run_reference(layer, ins)
        except Exception as e:  # noqa: BLE001 - named and re-raised as a build error
            raise BuildError(f"calibration: layer {layer.name!r} ({layer.op}) failed on a calibration batch: "
                             f"{type(e).__name__}: {e}", "check the batch shapes and dtypes against the inputs") from e
        for name, t in zip(layer.outputs, outs):
            if name and isinstance(t, torch.Tensor):
                env[name] = t
                if t.dtype.is_floating_point:
                    visit(name, t)
        for i in set(layer.inputs):
            if i and last.get(i) == k and i not in net.constants:
                env.pop(i, None)


def calibrate(net: Network, feeds: Iterable[dict], device: torch.device,
              settings: CalibrationSettings | None = None) -> dict[str, float]:
    settings = settings or CalibrationSettings()
    if settings.algorithm not in ALGORITHMS:
        raise BuildError(f"unknown calibration algorithm {settings.algorithm!r}", f"choose one of {', '.join(ALGORITHMS)}")
    feeds = list(feeds)
    if not feeds:
        raise BuildError("calibration got no batches", "give at least one calibration batch (32-64 inputs is typical)")
    log = get_logger()
    constants = {k: v.to(device) for k, v in net.constants.items()}
    ranges = RangeCollector()
    for feed in feeds:
        forward(net, feed, device, ranges.update, constants)
    amax = {n: r.amax for n, r in ranges.ranges.items()}
    if settings.algorithm != "minmax":
        hists = HistogramCollector(amax, settings.bins)
        for feed in feeds:
            forward(net, feed, device, hists.update, constants)
        amax = {n: amax_for(settings.algorithm, a, hists.hists.get(n), hists.width(n) if a > 0 else 0.0,
                            levels=settings.levels, percentile=settings.percentile, quantile=settings.quantile)
                for n, a in amax.items()}
    log.info(f"calibration ({settings.algorithm}): {len(feeds)} batch(es), {len(amax)} tensors given a range")
    return amax
