"""Tactic choice per layer: measured on the target GPU, remembered in the timing cache.

Entry point: `choose_tactics(net, device, config, opt_point=...) -> TacticReport`. For each layer the kernels
registry lists the applicable (tactic, config) pairs, with reasons for the rest. One candidate, a host-placed layer,
optimisation level 0, or a CPU build without a timing cache: the highest-priority candidate wins, untimed (CPU
engines stay reproducible by default). A CPU build with a timing cache (--timingCacheFile, set_timing_cache) times
its candidates with `CpuTimer` (host clock, median of a few runs) and keeps them in the cache as a GPU build does.
Otherwise each
candidate is built, run once (compilation, lazy init, and a check that it runs at all) and timed by a `Timer` on
inputs of the layer's real shapes, strides and dtypes at the opt point; the lowest median wins. Identical layers
(same `timing_cache.layer_signature`) are timed once per build, and never again when the timing cache is warm.
"""

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from statistics import median
from typing import Callable, Protocol

import torch

from ..ir import Layer, Network
from ..kernels import candidates
from ..kernels.compile_cache import active_pool, prune_block_configs, prune_tile_configs, workers_from_env
from ..kernels.compile_cache import for_build as kernel_cache
from ..util.device import fingerprint
from ..util.errors import BuildError
from ..util.log import get_logger
from .config import BuilderConfig
from .layout_walk import LayoutWalk
from .layout_walk import random_fill as _random_fill  # noqa: F401 - the name tests import
from .precompile import discover_jobs, queue_ahead
from .timing_cache import TimingCache, device_key, layer_signature
from .validation import (CODE_SLACK, CODE_SLACK_FRACTION, CODE_SLACK_FRACTIONS, disagreement, reference_outputs,
                         try_capture)
from .validation import disagreement as _disagreement  # noqa: F401 - the name tests import


@dataclass
class Measurement:
    times_ms: list[float]
    scratch_bytes: int | None = None    # device memory beyond inputs and outputs (None: not measurable here)

    @property
    def median_ms(self) -> float:
        return median(self.times_ms)


class Timer(Protocol):
    def measure(self, tactic_id: str, run: Callable[[], list]) -> Measurement: ...


@contextmanager
def tf32_mode(enabled: bool):
    """TF32 for fp32 matmul and convolution on (TensorRT's default) or off (--noTF32), restored afterwards."""
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = bool(enabled)
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


class CudaEventTimer:
    """GPU time of one candidate: `warmup` runs, then `iters` replays timed one by one with CUDA events.

    The candidate is captured in a CUDA graph when it can be (as the runtime will run it), so launch overhead on
    the host does not decide between a one-kernel and a three-kernel tactic; otherwise its eager runs are timed.
    Before every timed replay the L2 cache is flushed (a write of twice its size, outside the timed events): in
    the engine a layer's weights arrive cold from HBM (a network's weights do not fit in L2), and a kernel
    timed with its weights L2-resident looks faster than it will run there — measured on an H200, a Triton GEMM
    that won with hot weights ran 3× slower than cuBLAS inside GPT-2 at batch 1.
    Scratch memory = peak allocated during one run − memory before − bytes of the outputs.
    """

    def __init__(self, device: torch.device, warmup: int = 3, iters: int = 10, flush_l2: bool = True):
        self.device, self.warmup, self.iters = device, warmup, iters
        self._flush = None
        if flush_l2:
            l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or (64 << 20)
            self._flush = torch.empty(2 * l2, dtype=torch.uint8, device=device)

    def measure(self, tactic_id: str, run: Callable[[], list]) -> Measurement:
        dev = self.device
        torch.cuda.synchronize(dev)
        base = torch.cuda.memory_allocated(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        outs = run()
        torch.cuda.synchronize(dev)
        out_bytes = sum(o.untyped_storage().nbytes() for o in outs if isinstance(o, torch.Tensor))
        scratch = max(0, torch.cuda.max_memory_allocated(dev) - base - out_bytes)
        del outs
        stream = torch.cuda.Stream(dev)
        stream.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(stream):
            for _ in range(self.warmup):
                run()
            graph = try_capture(run, stream)
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(self.iters)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(self.iters)]
            for s, e in zip(starts, ends):
                if self._flush is not None:
                    self._flush.zero_()
                s.record()
                if graph is not None:
                    graph.replay()
                else:
                    run()
                e.record()
        torch.cuda.synchronize(dev)
        return Measurement([s.elapsed_time(e) for s, e in zip(starts, ends)], scratch)


class CpuTimer:
    """Host time of one candidate on the CPU: `warmup` runs, then the median of `iters` perf_counter-timed runs.

    Few iterations on purpose: CPU timing only decides between candidates of layers that have two or more (torch
    vs oneDNN, ...), and the build must stay quick. No scratch measurement on the host (scratch_bytes None)."""

    def __init__(self, warmup: int = 1, iters: int = 5):
        self.warmup, self.iters = warmup, iters

    def measure(self, tactic_id: str, run: Callable[[], list]) -> Measurement:
        for _ in range(self.warmup):
            run()
        times = []
        for _ in range(self.iters):
            t0 = time.perf_counter()
            run()
            times.append((time.perf_counter() - t0) * 1e3)
        return Measurement(times)


@dataclass
class TacticReport:
    timed_layers: int = 0          # layers measured in this build
    measurements: int = 0          # (tactic, config) candidates measured
    cache_hits: int = 0            # layers whose choice came from the timing cache
    untimed_layers: int = 0        # one candidate, host layer, level 0 or no GPU
    seconds: float = 0.0
    rejected: dict[str, dict[str, str]] = field(default_factory=dict)   # layer → tactic → reason
    compile_wait_s: float = 0.0    # waiting for the compile workers before timing a layer
    timing_s: float = 0.0          # candidates' first runs (in-process compiles included) and timed runs
    queue_s: float = 0.0           # dry calls finding every timed layer's Triton kernels for the workers, up front
    kernels: dict = field(default_factory=dict)    # Triton compile counts of a CUDA build (_kernel_counts)
    layer_s: dict[str, tuple[str, float, int]] = field(default_factory=dict)  # timed layer → (op, seconds, candidates)
    per_point: dict[str, int] = field(default_factory=dict)   # "min"/"max" → layers with another kernel there
    times: dict[str, tuple[str, dict[str, float]]] = field(default_factory=dict)  # layer → (signature key, tactic → ms)
    context: dict = field(default_factory=dict)    # network-context timing (context_timing.ContextReport.as_dict)
    graph_capture: dict = field(default_factory=dict)  # CUDA builds: layers that keep it out of CUDA graphs (graph_probe.py)

    def slowest(self, n: int = 8) -> list[dict]:
        """The `n` timed layers that took the longest to choose (compile wait + first runs + timed runs)."""
        top = sorted(self.layer_s.items(), key=lambda kv: -kv[1][1])[:n]
        return [{"layer": k, "op": op, "seconds": round(s, 3), "candidates": c} for k, (op, s, c) in top]

    def as_dict(self) -> dict:
        return {"timed_layers": self.timed_layers, "measurements": self.measurements, "cache_hits": self.cache_hits,
                "untimed_layers": self.untimed_layers, "seconds": round(self.seconds, 3),
                "compile_wait_s": round(self.compile_wait_s, 3), "timing_s": round(self.timing_s, 3),
                "queue_s": round(self.queue_s, 3),
                "other_s": round(max(0.0, self.seconds - self.compile_wait_s - self.timing_s - self.queue_s), 3),
                **({"kernels": self.kernels} if self.kernels else {}),
                **({"slowest_layers": self.slowest()} if self.layer_s else {}),
                **({"per_point": self.per_point} if self.per_point else {}),
                **({"context": self.context} if self.context else {})}


def _open_cache(config: BuilderConfig, cache: TimingCache | None) -> TimingCache | None:
    if not config.use_timing_cache:
        return None
    if cache is not None:
        return cache
    if getattr(config, "timing_cache", None) is not None:
        return config.timing_cache
    if config.timing_cache_path:
        return TimingCache.load(config.timing_cache_path)
    return TimingCache()        # in memory: identical layers of this build are timed once


def choose_tactics(net: Network, device: torch.device, config: BuilderConfig, progress=None,
                   opt_point: dict | None = None, timer: Timer | None = None,
                   cache: TimingCache | None = None, opt_env: dict | None = None,
                   after_choice: Callable | None = None) -> TacticReport:
    """Set `layer.tactic` for every layer of `net`. `timer` forces timing (tests pass a fake one on CPU);
    `opt_env`: the tensors propagated at `opt_point`, when the caller has them (else propagated here);
    `after_choice(net, walk, cache, dev_key, report)`: called once every layer has its tactic, on a timed build,
    before the timing cache is saved (builder.py: network-context timing, context_timing.py)."""
    log = get_logger()
    t0 = time.perf_counter()
    report = TacticReport()
    cpu_cache = device.type == "cpu" and config.use_timing_cache and bool(
        config.timing_cache_path or getattr(config, "timing_cache", None) is not None or cache is not None)
    timing = config.optimization_level > 0 and (timer is not None or device.type == "cuda" or cpu_cache)
    if timing and timer is None:
        timer = CudaEventTimer(device) if device.type == "cuda" else CpuTimer()
    cache = _open_cache(config, cache) if timing else None
    if not timing and config.timing_cache_path:
        log.info(f"timing cache {config.timing_cache_path} not used: "
                 f"{'optimisation level 0' if config.optimization_level == 0 else device.type + ' builds'} time no tactics")
    dev_key = device_key(fingerprint(device)) if timing else ""
    walk = LayoutWalk(net, opt_point, device, opt_env) if timing else None
    if progress is not None and hasattr(progress, "begin"):
        progress.begin(len(net.layers))               # a progress bar / IProgressMonitor learns the step count
    # CUDA builds compile Triton kernels into the checked per-device cache (kernels/compile_cache.py): a second
    # build of any model loads them instead of compiling
    with tf32_mode(config.tf32) if device.type == "cuda" else _nothing(), \
            kernel_cache(fingerprint(device), workers=workers_from_env() if timing else 0) \
            if device.type == "cuda" else _nothing() as kcache:
        if kcache is not None and kcache.pool is not None:      # every timed layer's kernels queued up front
            ahead = LayoutWalk(net, opt_point, device, walk.env)
            ahead._on_device = walk._on_device                     # the weights once on the device
            queued = queue_ahead(net.layers, ahead, kcache.pool,
                                 lambda layer: _selector(layer, device, cache, dev_key, ahead))
            report.queue_s = queued["seconds"]
            log.verbose(f"kernel precompile: {queued['jobs']} Triton compiles of {queued['layers']} layers queued "
                        f"for {kcache.pool.workers} workers in {queued['seconds']:.2f} s "
                        f"({kcache.pool.variants} distinct, {kcache.pool.cached} already cached)")
        for layer in net.layers:
            found, reasons = candidates(layer, device)
            if not found:
                why = "; ".join(f"{k}: {v}" for k, v in reasons.items()) or "no tactic is registered"
                raise BuildError(f"layer {layer.name!r} ({layer.op}) has no tactic for {device.type}: {why}",
                                 "build for another device or write a plugin for this op")
            for name, why in reasons.items():
                log.verbose(f"layer {layer.name}: tactic {name} rejected: {why}")
            if not timing or len(found) == 1 or layer.placement == "host":
                tac, cfg = _first_fit(layer, found, opt_env if not timing else None)
                layer.tactic = tac.id(cfg)
                report.untimed_layers += 1
                if walk is not None:
                    walk.untimed(layer)
            elif _layout_bound(layer, device, config):
                _first_fit_run_once(layer, found, walk)
                report.untimed_layers += 1
            else:
                if progress is not None and hasattr(progress, "timing"):
                    progress.timing(layer, len(found))       # the bar names the layer being timed
                _choose_timed(layer, found, walk, timer, cache, dev_key, config, report)
            if progress is not None:
                progress(layer)
        if after_choice is not None and timing:
            after_choice(net, walk, cache, dev_key, report)
    if kcache is not None:
        report.kernels = _kernel_counts(kcache)
    if cache is not None and config.timing_cache_path and (cache.recorded or not os.path.exists(config.timing_cache_path)):
        cache.save(config.timing_cache_path)          # a fully warm build leaves the file as it was
    report.seconds = time.perf_counter() - t0
    if timing:
        log.info(f"tactics: {report.timed_layers} layers timed ({report.measurements} measurements), "
                 f"{report.cache_hits} from the timing cache, {report.untimed_layers} untimed, {report.seconds:.2f} s"
                 + (f", {kcache.compiled} Triton kernels compiled ({kcache.checked.kept} cached; "
                    f"{report.kernels['workers']} in {report.kernels['pool_workers']} workers, "
                    f"{report.kernels['inline']} at first launch)" if kcache else ""))
    return report


# CPU convolutions keep their first fit (priority: oneDNN channels-last) untimed. Timed one layer at a time, torch's
# NCHW convolution often wins alone and then costs its consumers an NHWC copy each: in one process, alternating
# blocks, 2 threads (2026-12-04), timed vs untimed builds ran resnet50 b1 40.4 vs 36.8 ms, MobileNetV3 b1 9.5 vs
# 8.8 ms, a YOLO-style detector at 640² 25.7 vs 22.1 ms. Timing them in network context would do better still.
# The first fit is oneDNN's primitives through its C library (kernels/cpu_dnnl_conv.py) where that is installed, not
# timed against torch's per-call oneDNN op: timed alone the two swap places on noise, and one engine mixing the two
# oneDNN copies was not faster (ResNet-50 b8, one process, 2026-12-05: all C-API 267 ms, all torch-op 282, the
# timed mix 288).
_CPU_LAYOUT_BOUND = {"Conv", "FusedConv", "GatedConv", "FusedConvPool"}


def _layout_bound(layer: Layer, device: torch.device, config: BuilderConfig) -> bool:
    """A CPU convolution left untimed (above); not in --best's trial builds, which weigh every layer's cost."""
    return device.type == "cpu" and layer.op in _CPU_LAYOUT_BOUND and not config.time_every_layer


def _first_fit_run_once(layer: Layer, found, walk: LayoutWalk) -> None:
    """The first fit, run once on the walk's inputs so that its consumers are timed on the strides it really
    emits (a channels-last convolution's NHWC output); if that run fails, the reference's strides."""
    inputs = walk.materialize(layer)
    tac, cfg = _first_fit(layer, found, {n: t for n, t in zip(layer.inputs, inputs) if n})
    layer.tactic = tac.id(cfg)
    try:
        outs = tac.build(layer, cfg, walk.device)(inputs)
    except Exception:  # noqa: BLE001 - the strides are a timing aid; the runtime reports real failures
        walk.untimed(layer)
        return
    walk.set_strides(layer, [list(o.stride()) if isinstance(o, torch.Tensor) else None for o in outs])
    get_logger().verbose(f"layer {layer.name}: {layer.tactic} (CPU convolution: first fit, not timed)")


def _kernel_counts(kcache) -> dict:
    """Where a CUDA build's Triton kernels came from: new cache entries, compiled by the workers or in this
    process at first launch (and those compiles' seconds), distinct variants the workers were asked for."""
    pool = kcache.pool
    return {"new_entries": kcache.compiled, "cached_before": kcache.checked.kept,
            "pool_workers": pool.workers if pool else 0, "variants": pool.variants if pool else 0,
            "workers": pool.jobs if pool else 0, "workers_compile_s": round(pool.compile_s, 3) if pool else 0.0,
            "failed": pool.failures if pool else 0,
            "inline": kcache.inline, "inline_s": round(kcache.inline_s, 3)}


def _selector(layer: Layer, device, cache: TimingCache | None, dev_key: str, walk: LayoutWalk):
    """For the ahead-of-time queue: None when `layer` will not be timed (host, one candidate, a timing-cache
    hit), else a function of its inputs giving the candidates left after pruning."""
    found, _ = candidates(layer, device)
    if layer.placement == "host" or len(found) < 2:
        return None
    if cache is not None:
        ids = [t.id(c) for t, c in found]
        entry = cache.lookup(dev_key, layer_signature(layer, walk.describe_inputs(layer), ids)[0])
        if entry is not None and entry.get("best") in ids:
            return None

    def select(inputs):
        pruned = _prune(layer, found, inputs, device)
        return [(t, c) for t, c in found if t.id(c) not in pruned]
    return select


def _first_fit(layer: Layer, found, env: dict | None):
    """Untimed choice: the best-priority candidate whose `fits()` takes the layer's tensors at the opt point (a
    tactic that rejects them says why under --verbose; the reference, with no `fits`, always takes them)."""
    if env is None:
        return found[0]
    inputs = [env.get(i) if i else None for i in layer.inputs]
    for tac, cfg in found:
        why = tac.fits(layer, cfg, inputs) if tac.fits is not None else None
        if why is None:
            return tac, cfg
        get_logger().verbose(f"layer {layer.name}: tactic {tac.id(cfg)} rejected at the opt point: {why}")
    return found[-1]


@contextmanager
def _nothing():
    yield


def _choose_timed(layer: Layer, found, walk: LayoutWalk, timer: Timer, cache: TimingCache | None, dev_key: str,
                  config: BuilderConfig, report: TacticReport) -> None:
    log = get_logger()
    ids = [t.id(c) for t, c in found]
    key, sig = layer_signature(layer, walk.describe_inputs(layer), ids)
    entry = cache.lookup(dev_key, key) if cache is not None else None
    if entry is not None and entry.get("best") in ids:
        layer.tactic = entry["best"]
        report.cache_hits += 1
        report.times[layer.name] = (key, dict(entry.get("times_ms") or {}))
        walk.set_strides(layer, entry.get("out_strides"))
        log.verbose(f"layer {layer.name}: {layer.tactic} (timing cache)")
        return
    if getattr(config, "error_on_timing_cache_miss", False):
        raise BuildError(f"layer {layer.name!r} ({layer.op}) is not in the timing cache "
                         f"({len(ids)} candidate tactics) and --errorOnTimingCacheMiss is set",
                         "build once without --errorOnTimingCacheMiss to fill the cache, or drop the flag")
    inputs = walk.materialize(layer)
    expected = reference_outputs(layer, inputs)
    pruned = _prune(layer, found, inputs, walk.device)
    found = [(t, c) for t, c in found if t.id(c) not in pruned]
    pool = active_pool()                  # worker processes of this build (TFG_COMPILE_WORKERS), else None
    t_wait = time.perf_counter()
    built = _precompile(layer, found, inputs, walk.device, pool) if pool is not None else {}
    report.compile_wait_s += time.perf_counter() - t_wait
    t_time = time.perf_counter()
    times, rejected, strides = {}, dict(pruned), {}
    for tac, cfg in found:
        tid = tac.id(cfg)
        unfit = tac.fits(layer, cfg, inputs) if tac.fits is not None else None
        if unfit is not None:
            rejected[tid] = unfit
            continue
        try:
            kernel = built.pop(tid, None) or tac.build(layer, cfg, walk.device)
            outs = kernel(inputs)
            slack = tac.code_slack(layer, cfg) if tac.code_slack is not None else None
            slack = slack or (CODE_SLACK.get(layer.op, ()), CODE_SLACK_FRACTIONS.get(layer.op, CODE_SLACK_FRACTION))
            wrong = disagreement(outs, expected, config.tf32, *slack)
            if wrong is not None:
                rejected[tid] = f"wrong results at the opt-point shapes: {wrong}"
                continue
            m = timer.measure(tid, lambda: kernel(inputs))
        except Exception as e:  # noqa: BLE001 - the candidate is rejected with its reason, the others compete
            rejected[tid] = f"failed at the opt-point shapes: {type(e).__name__}: {(str(e).splitlines() or [''])[0]}"
            continue
        report.measurements += 1
        if config.workspace_bytes is not None and m.scratch_bytes is not None and m.scratch_bytes > config.workspace_bytes:
            rejected[tid] = f"needs {m.scratch_bytes} B of workspace; the limit (--memPoolSize=workspace) is {config.workspace_bytes} B"
            continue
        times[tid] = m.median_ms
        strides[tid] = [list(o.stride()) if isinstance(o, torch.Tensor) else None for o in outs]
    report.timing_s += time.perf_counter() - t_time
    report.layer_s[layer.name] = (layer.op, time.perf_counter() - t_wait, len(found))
    for tid, why in rejected.items():
        log.verbose(f"layer {layer.name}: tactic {tid} rejected: {why}")
    report.rejected[layer.name] = rejected
    if not times:
        if config.workspace_bytes is not None and rejected and all("workspace" in r for r in rejected.values()):
            raise BuildError(f"layer {layer.name!r} ({layer.op}): every tactic needs more workspace than the limit",
                             f"raise --memPoolSize=workspace (smallest need: {next(iter(rejected.values()))})")
        layer.tactic = ids[0]
        log.warning(f"layer {layer.name}: every tactic failed while timing on random inputs; using {ids[0]} "
                    f"untimed ({next(iter(rejected.values()))})")
        walk.untimed(layer)
        return
    best = min(times, key=times.get)
    layer.tactic = best
    report.timed_layers += 1
    report.times[layer.name] = (key, dict(times))
    walk.set_strides(layer, strides[best])
    log.verbose(f"layer {layer.name}: {best} " + ", ".join(f"{t}={ms:.4f}ms" for t, ms in sorted(times.items())))
    if cache is not None:
        cache.record(dev_key, key, {"op": layer.op, "signature": sig, "best": best, "times_ms": times,
                                    "rejected": rejected, "out_strides": strides[best]})


def _prune(layer: Layer, found, inputs: list, device) -> dict[str, str]:
    """Tile configs of a GEMM (MatMulEpilogue: a is (…, M, K), b (K, N) or (N, K) with trans_b) that cannot win,
    dropped before anything is compiled (compile_cache.prune_tile_configs): shared memory above the device's
    per-block limit, or a config dominated by one with smaller tiles that still cover the problem (all else
    equal). A PointwiseChain's single-program configs: compile_cache.prune_block_configs. tactic id → reason."""
    if layer.op == "PointwiseChain":
        return _prune_elementwise(found, inputs)
    if layer.op != "MatMulEpilogue" or len(inputs) < 2 or not all(isinstance(t, torch.Tensor) for t in inputs[:2]):
        return {}
    a, b = inputs[0], inputs[1]
    if a.dim() < 2 or b.dim() < 2 or not a.shape[-1]:
        return {}
    m, k = a.numel() // a.shape[-1], a.shape[-1]
    n = b.shape[-2] if layer.attrs.get("trans_b", 0) else b.shape[-1]
    smem = None
    if device.type == "cuda":
        smem = getattr(torch.cuda.get_device_properties(device), "shared_memory_per_block_optin", None)
    out: dict[str, str] = {}
    by_tactic: dict[str, list] = {}
    for tac, cfg in found:
        if all(key in cfg for key in ("BM", "BN", "BK")):
            by_tactic.setdefault(tac.name, []).append((tac, cfg))
    for pairs in by_tactic.values():
        _, dropped = prune_tile_configs([c for _, c in pairs], m, n, k, a.element_size(), smem)
        for tac, cfg in pairs:
            why = dropped.get(",".join(f"{key}={cfg[key]}" for key in sorted(cfg)))
            if why is not None:
                out[tac.id(cfg)] = f"pruned before compiling: {why}"
    return out


def _prune_elementwise(found, inputs: list) -> dict[str, str]:
    """BLOCK configs of an elementwise tactic that cannot win on the broadcast output's element count."""
    shapes = [t.shape for t in inputs if isinstance(t, torch.Tensor)]
    if not shapes:
        return {}
    n = 1
    for size in torch.broadcast_shapes(*shapes):
        n *= size
    out: dict[str, str] = {}
    by_tactic: dict[str, list] = {}
    for tac, cfg in found:
        if "BLOCK" in cfg:
            by_tactic.setdefault(tac.name, []).append((tac, cfg))
    for pairs in by_tactic.values():
        _, dropped = prune_block_configs([c for _, c in pairs], n)
        for tac, cfg in pairs:
            why = dropped.get(",".join(f"{key}={cfg[key]}" for key in sorted(cfg)))
            if why is not None:
                out[tac.id(cfg)] = f"pruned before compiling: {why}"
    return out


def _precompile(layer: Layer, found, inputs: list, device, pool) -> dict:
    """Build every fitting candidate, find the Triton kernels each will launch (one dry call, nothing compiled or
    launched: compile_cache.discover) and compile them all at once in the worker processes, so the timing loop
    below loads them from the cache (most were queued before the first layer was timed: queue_ahead; the pool
    compiles each variant once). Returns the built kernels by tactic id (a build that fails here is built
    again, and rejected with its reason, in the loop)."""
    built, jobs = discover_jobs(layer, found, inputs, device)
    if jobs:
        t0 = time.perf_counter()
        ok = pool.compile_all(jobs, new=pool.backlog() <= pool.workers)
        get_logger().verbose(f"layer {layer.name}: {ok}/{len(jobs)} Triton kernels compiled in {pool.workers} "
                             f"workers in {time.perf_counter() - t0:.2f} s" +
                             (f" (in-process instead: {pool.failed})" if pool.failed else ""))
        pool.failed.clear()
    return built
