"""--best: INT8 or FP16 per layer, by timing (TensorRT's per-layer choice among every allowed precision).

Entry point: `choose_precisions(net, config, device) -> BestChoice`, called before quantization when tactics are
timed (CUDA builds; CPU builds with a timing cache). Two trial builds time every layer — FP16 with INT8 everywhere
it applies, and FP16 alone — with a cache that remembers the time of each layer's chosen tactic. A quantizable ONNX
node's cost in a build is the time of the engine layers that contain it, each layer's time shared evenly among its
ONNX nodes (the Q of an activation counts to the node that produced it). A node stays FP16 when its FP16 cost is
lower; the final build quantizes the rest, reusing the trial's calibrated ranges. Costs: two extra builds.

Per-node costs are estimates (a fused layer's time shared among its nodes; isolated, uncaptured timings; the Q/DQ
a mixed network adds at its INT8/FP16 borders): on the H100 at batch 1 the mixed engines ran 0.88–0.97× as fast as
the FP16 engines of the same run (bert-base, gpt2, resnet50, mobilenet_v3_large, efficientnet_b0). So on CUDA the
final build measures its whole network against the FP16 trial's (`compare_with_fp16`: both captured as CUDA
graphs, replayed in alternation at the opt point) and keeps the FP16 engine unless the mixed one is faster by
more than ``GAIN`` — TensorRT's --best never runs a model slower than its FP16 engine either. Not where a
--layerPrecisions entry asks for INT8/FP8 (the FP16 engine would break the constraint).

Timing cache: the trials start from the build's own timing cache (--timingCacheFile, or the TimingCache object)
and leave what they timed in it. So with the cache an --fp16 build of the same model filled, the FP16 trial is
that engine, tactic for tactic, rather than a re-timed one (on the H100 at a1ebd6d the guard kept the re-timed
FP16 trial for all five models measured at batch 1, and those ran 0.906–1.073× as fast as the same run's --fp16
engines: the spread of two fp16 builds, not of precision), and the final build finds every layer the trials timed
in the cache.
"""

from dataclasses import dataclass, field, replace
from typing import Any, Callable

import torch

from ..ir import Network
from ..util.log import get_logger
from .timing_cache import TimingCache


@dataclass
class BestChoice:
    keep_fp16: list[str] = field(default_factory=list)
    costs: dict[str, tuple[float, float]] = field(default_factory=dict)     # node → (int8 ms, fp16 ms)
    amax: dict[str, float] = field(default_factory=dict)
    fp16_engine: Any = None         # the FP16 trial's engine and its network program (CUDA), for compare_with_fp16
    fp16_program: Any = None
    verdict: dict = field(default_factory=dict)


    def costs_ms(self) -> dict[str, dict[str, float]]:
        """build_info's form of `costs`: node → {"int8": ms, "fp16": ms}."""
        return {n: {"int8": round(q, 5), "fp16": round(f, 5)} for n, (q, f) in self.costs.items()}


GAIN = 0.005        # the mixed engine is kept when its network is faster than the FP16 one's by more than 0.5 %
QUANTIZED = ("int8", "fp8")


class _RecordingCache(TimingCache):
    """A timing cache that remembers the entry of the layer being chosen (read by the progress callback)."""

    def __init__(self):
        super().__init__()
        self.last = None

    def lookup(self, dev, key):
        self.last = super().lookup(dev, key)
        return self.last

    def record(self, dev, key, entry):
        super().record(dev, key, entry)
        self.last = entry


def _user_cache(config) -> TimingCache | None:
    """The timing cache the build was given (a TimingCache object, or --timingCacheFile's contents), if any."""
    if not config.use_timing_cache:
        return None
    if config.timing_cache is not None:
        return config.timing_cache
    return TimingCache.load(config.timing_cache_path) if config.timing_cache_path else None


def _node_costs(net: Network, config, build_engine: Callable, programs: list | None = None,
                seed: TimingCache | None = None) -> tuple[dict[str, float], object, TimingCache]:
    """One trial build (`build_engine`: the builder's own entry point, handed down so that this module does not
    import the builder that imports it): per-ONNX-node costs, the engine, and the trial's cache (`seed`'s entries,
    the user's timing cache, plus what the trial timed). Seeded, a trial of a network the cache has seen chooses
    exactly what the cache says — the FP16 trial then is the engine an --fp16 build with that cache makes — instead
    of re-timing."""
    cache = _RecordingCache()
    if seed is not None:
        cache.merge(seed)
    costs: dict[str, float] = {}

    def progress(layer, *_):
        entry, cache.last = cache.last, None
        ms = (entry or {}).get("times_ms", {}).get(layer.tactic)
        if ms is None or not layer.origin:
            return
        for origin in layer.origin:
            costs[origin] = costs.get(origin, 0.0) + ms / len(layer.origin)
    cfg = replace(config, timing_cache=cache, use_timing_cache=True, timing_cache_path=None, time_every_layer=True)
    engine = build_engine(net, cfg, progress=progress, programs=programs)
    return costs, engine, cache


def _keep_trial_timings(config, caches: list[TimingCache]) -> None:
    """The trials' timings go to the user's timing cache (the object in place, or --timingCacheFile merged on
    disk), as a TensorRT timing cache keeps every tactic timed: a later build, and this build's final one, reuse
    them. Nothing is written without a cache (--noBuilderCache, or none given)."""
    if not config.use_timing_cache:
        return
    if config.timing_cache is not None:
        for c in caches:
            config.timing_cache.merge(c)
    elif config.timing_cache_path:
        merged = TimingCache()
        for c in caches:
            merged.merge(c)
        merged.save(config.timing_cache_path)


def compares_networks(device: torch.device) -> bool:
    """Whether the final build times its whole network against the FP16 trial's (CUDA: the timer replays graphs)."""
    return device.type == "cuda"


def _wants_quantized(config) -> bool:
    """Whether a --layerPrecisions entry ([(name or "*", precision)]) asks for INT8 or FP8."""
    return any(p in QUANTIZED for _, p in config.layer_precisions or [])


def compare_with_fp16(choice: BestChoice, program, timer) -> dict:
    """Whole-network medians of the final (mixed) program and the FP16 trial's, timed in alternation by `timer`
    (context_timing.GraphPairTimer); {"kept": "fp16" | "mixed", …}. The FP16 program is released here. Anything
    that keeps the two from being compared keeps the mixed engine, with the reason."""
    fp16, choice.fp16_program = choice.fp16_program, None
    if program is None or fp16 is None:
        return {"kept": "mixed", "why": "no whole-network program to compare"}
    try:
        times = timer.compare(program, fp16)
    except Exception as e:  # noqa: BLE001 - e.g. out of memory for two graphs: the mixed engine stands, said so
        return {"kept": "mixed", "why": f"not compared: {type(e).__name__}: {(str(e).splitlines() or [''])[0]}"}
    if times is None:
        return {"kept": "mixed", "why": "a network could not be captured in a CUDA graph"}
    mixed_ms, fp16_ms = times
    return {"kept": "mixed" if mixed_ms < fp16_ms * (1 - GAIN) else "fp16",
            "mixed_ms": round(mixed_ms, 5), "fp16_ms": round(fp16_ms, 5)}


def verdict_line(verdict: dict) -> str:
    """The build-log line for compare_with_fp16's verdict."""
    kept = "the FP16 engine is kept" if verdict["kept"] == "fp16" else "the INT8/FP16 engine is kept"
    if "mixed_ms" not in verdict:
        return f"--best: {kept} ({verdict.get('why', '')})"
    return (f"--best: the INT8/FP16 network runs {verdict['mixed_ms']:.4f} ms, the FP16 network "
            f"{verdict['fp16_ms']:.4f} ms: {kept} (a mixed engine must be faster by more than {100 * GAIN:.1f} %)")


def choose_precisions(net: Network, config, device: torch.device, build_engine: Callable) -> BestChoice | None:
    log = get_logger()
    seed = _user_cache(config)
    timed = config.optimization_level > 0 and (device.type == "cuda" or seed is not None)
    if not timed:
        log.info("--best: tactics are not timed on this build (CPU without a timing cache, or level 0): every "
                 "quantizable layer runs INT8")
        return None
    base = replace(config, best=False, fp16=True)
    q_costs, q_engine, q_cache = _node_costs(net.copy(), replace(base, int8=True), build_engine, seed=seed)
    quant = q_engine.build_info.get("quantization")
    if not quant:
        _keep_trial_timings(config, [q_cache])
        return None
    nodes = set(quant["layers"])
    amax = {n: s * 127.0 for n, s in quant["tensor_scales"].items()}
    programs = [] if compares_networks(device) and not _wants_quantized(config) else None
    floats = [(n, p) for n, p in config.layer_precisions or [] if p not in QUANTIZED]        # the FP16 trial
    f_costs, f_engine, f_cache = _node_costs(net.copy(), replace(base, int8=False, fp8=False, calibration=None,
                                                                 layer_precisions=floats),  # cannot meet int8 entries
                                             build_engine, programs, seed=seed)
    _keep_trial_timings(config, [q_cache, f_cache])
    choice = BestChoice(amax=amax)
    if programs:
        choice.fp16_engine, choice.fp16_program = f_engine, programs[0]
    for n in sorted(nodes):
        if n not in q_costs or n not in f_costs:      # a layer not timed in one build (one tactic): stays INT8
            continue
        choice.costs[n] = (q_costs[n], f_costs[n])
        if f_costs[n] < q_costs[n]:
            choice.keep_fp16.append(n)
    log.info(f"--best: {len(nodes) - len(choice.keep_fp16)} layer(s) INT8, {len(choice.keep_fp16)} faster in FP16"
             + (f" ({', '.join(choice.keep_fp16)})" if choice.keep_fp16 else ""))
    return choice
