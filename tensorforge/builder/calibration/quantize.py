"""The builder's implicit-quantization step: ranges for every tensor, then Q/DQ layers (qdq_insert.py).

Entry point: `quantize_network(net, config, device, points) -> QuantizationResult | None`, called before the graph
passes, so the inserted Q/DQ meet the same fusion rules as an explicit Q/DQ model. Ranges, in order of precedence:
`config.dynamic_ranges` (ITensor.set_dynamic_range), then a calibration cache (the source's read_cache), then a
calibration run over the source's batches (whose cache is then written), else trtexec's placeholders for speed
runs (inputs ±2, every other tensor ±4, with a warning that accuracy is not kept). A network that already has
Q/DQ layers is explicitly quantized: nothing is inserted (TensorRT ignores calibration there too).
Before calibrating, constants are folded and BatchNorm is folded into convolutions, so the weights quantized
per channel are the ones the engine computes with.
"""

import re
from collections import Counter
from dataclasses import dataclass, field

import torch

from ...ir import Network
from ...ir.interpret import propagate
from ...passes.constant_fold import fold_constants
from ...passes.dead_code import remove_dead_layers
from ...passes.rules import conv_bn
from ...passes.rules.base import rule_pass
from ...util.errors import BuildError
from ...util.log import get_logger
from .cache import cache_from_amax, read_cache, write_cache
from .qdq_insert import LEVELS, QdqReport, has_qdq, insert_qdq
from .run import CalibrationSettings, calibrate

PLACEHOLDER_INPUT, PLACEHOLDER_OTHER = 2.0, 4.0


@dataclass
class QuantizationResult:
    kind: str
    origin: str                                        # dynamic-ranges | cache | calibration | placeholder | mixed
    amax: dict[str, float] = field(default_factory=dict)
    report: QdqReport | None = None

    def scales(self) -> dict[str, float]:
        """Scale of every tensor with a range (amax / 127 for INT8, amax / 448 for FP8): stored in the engine."""
        return {n: a / LEVELS[self.kind] for n, a in self.amax.items()}


def _float_tensors(net: Network, point: dict, max_fold: int) -> list[str]:
    env = propagate(net, point, max_fold)
    names = [n for n in net.inputs if env[n].dtype.is_floating_point]
    names += [o for la in net.layers for o in la.outputs if o and o in env and env[o].dtype.is_floating_point]
    return names


def _check_profile(feeds: list[dict], profile) -> None:
    """Every calibration batch within the calibration profile (--minShapesCalib … --maxShapesCalib)."""
    for feed in feeds:
        for name, (mn, _, mx) in (profile.shapes.items() if profile is not None else []):
            shape = tuple(feed[name].shape) if name in feed else None
            if shape is not None and (len(shape) != len(mn) or any(not a <= s <= b for a, s, b in zip(mn, shape, mx))):
                raise BuildError(f"calibration batch for {name!r} has shape {list(shape)}, outside the calibration "
                                 f"profile {list(mn)} … {list(mx)}", "fix the calibration profile or the batches")


def _ranges(net: Network, config, device, points, log) -> tuple[dict[str, float], str]:
    source = config.calibration
    amax: dict[str, float] = {}
    origin = "placeholder"
    if source is not None and source.read_cache is not None:
        data = source.read_cache()
        if data:
            cache = read_cache(data)
            amax = cache.amaxes(127.0)
            origin = "cache"
            log.info(f"calibration cache read: {len(amax)} tensor scales (TRT-{cache.version}-{cache.header_algorithm})")
    if not amax and source is not None and source.batches is not None:
        settings = CalibrationSettings(source.algorithm, percentile=source.percentile, quantile=source.quantile)
        feeds = source.feeds(list(net.inputs))
        _check_profile(feeds, config.calibration_profile)
        amax = calibrate(net, feeds, device, settings)
        origin = "calibration"
        if source.write_cache is not None:
            source.write_cache(write_cache(cache_from_amax(amax, source.algorithm, 127.0)))
    if config.dynamic_ranges:
        amax.update({k: float(v) for k, v in config.dynamic_ranges.items()})
        origin = "dynamic-ranges" if origin == "placeholder" else "mixed"
    if origin == "placeholder":
        log.warning("INT8/FP8 without calibration data, cache or dynamic ranges: every range is a placeholder (inputs "
                 "±2, other tensors ±4), as trtexec does for speed runs; accuracy is not kept (give --calib, "
                 "--calibData or calibration_data)")
        names = _float_tensors(net, points[0], config.max_fold_elements)
        amax = {n: PLACEHOLDER_INPUT if n in net.inputs else PLACEHOLDER_OTHER for n in names}
    return amax, origin


def quantize_network(net: Network, config, device: torch.device, points: list[dict],
                     skip: set[str] = frozenset()) -> QuantizationResult | None:
    log = get_logger()
    kind = "int8" if (config.int8 or config.best) else "fp8"
    if has_qdq(net):
        log.info(f"{kind.upper()}: the network has Q/DQ layers (explicit quantization); calibration and implicit "
                 "Q/DQ insertion are skipped")
        return None
    fold_constants(net, shape_points=points, max_fold_elements=config.max_fold_elements)
    remove_dead_layers(net, shape_points=points)
    if config.optimization_level >= 2:
        rule_pass(*conv_bn.RULES)(net, shape_points=points)
    amax, origin = _ranges(net, config, device, points, log)
    if not amax:
        raise BuildError("quantization found no tensor ranges", "check the calibration data and the network's inputs")
    report = insert_qdq(net, amax, kind, skip)
    net.implicit_quantization = kind      # the passes may quantize what TensorRT's implicit INT8 does (qdq_dual.py)
    why = Counter(re.sub(r"\d+", "N", reason) for reason in report.skipped.values())
    log.info(f"{kind.upper()} ({origin} ranges): Q/DQ inserted at {len(report.layers)} layer(s); "
             f"{len(report.skipped)} quantizable layer(s) stay float"
             + "".join(f"; {n} × {reason}" for reason, n in why.most_common(3)))
    for name, why in report.skipped.items():
        log.verbose(f"  {name} stays float: {why}")
    return QuantizationResult(kind, origin, amax, report)
