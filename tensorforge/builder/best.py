"""--best: INT8 or FP16 per layer, by timing (TensorRT's per-layer choice among every allowed precision).

Entry point: `choose_precisions(net, config, device) -> BestChoice`, called before quantization when tactics are
timed (CUDA builds; CPU builds with a timing cache). Two trial builds time every layer — FP16 with INT8 everywhere
it applies, and FP16 alone — with a cache that remembers the time of each layer's chosen tactic. A quantizable ONNX
node's cost in a build is the time of the engine layers that contain it, each layer's time shared evenly among its
ONNX nodes (the Q of an activation counts to the node that produced it). A node stays FP16 when its FP16 cost is
lower; the final build quantizes the rest, reusing the trial's calibrated ranges. Costs: two extra builds.
"""

from dataclasses import dataclass, field, replace

import torch

from ..ir import Network
from ..util.log import get_logger
from .timing_cache import TimingCache


@dataclass
class BestChoice:
    keep_fp16: list[str] = field(default_factory=list)
    costs: dict[str, tuple[float, float]] = field(default_factory=dict)     # node → (int8 ms, fp16 ms)
    amax: dict[str, float] = field(default_factory=dict)


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


def _node_costs(net: Network, config) -> tuple[dict[str, float], object]:
    from .builder import build_engine
    cache = _RecordingCache()
    costs: dict[str, float] = {}

    def progress(layer, *_):
        entry, cache.last = cache.last, None
        ms = (entry or {}).get("times_ms", {}).get(layer.tactic)
        if ms is None or not layer.origin:
            return
        for origin in layer.origin:
            costs[origin] = costs.get(origin, 0.0) + ms / len(layer.origin)
    cfg = replace(config, timing_cache=cache, use_timing_cache=True, timing_cache_path=None, time_every_layer=True)
    engine = build_engine(net, cfg, progress=progress)
    return costs, engine


def choose_precisions(net: Network, config, device: torch.device) -> BestChoice | None:
    log = get_logger()
    timed = config.optimization_level > 0 and (device.type == "cuda" or config.timing_cache is not None)
    if not timed:
        log.info("--best: tactics are not timed on this build (CPU without a timing cache, or level 0): every "
                 "quantizable layer runs INT8")
        return None
    base = replace(config, best=False, fp16=True)
    q_costs, q_engine = _node_costs(net.copy(), replace(base, int8=True))
    quant = q_engine.build_info.get("quantization")
    if not quant:
        return None
    nodes = set(quant["layers"])
    amax = {n: s * 127.0 for n, s in quant["tensor_scales"].items()}
    f_costs, _ = _node_costs(net.copy(), replace(base, int8=False, fp8=False, calibration=None))
    choice = BestChoice(amax=amax)
    for n in sorted(nodes):
        if n not in q_costs or n not in f_costs:      # a layer not timed in one build (one tactic): stays INT8
            continue
        choice.costs[n] = (q_costs[n], f_costs[n])
        if f_costs[n] < q_costs[n]:
            choice.keep_fp16.append(n)
    log.info(f"--best: {len(nodes) - len(choice.keep_fp16)} layer(s) INT8, {len(choice.keep_fp16)} faster in FP16"
             + (f" ({', '.join(choice.keep_fp16)})" if choice.keep_fp16 else ""))
    return choice
