"""Network-context timing: close calls of the layer-by-layer choice timed again inside the whole network.

Layer-by-layer timing (tactics.py) measures each candidate alone, on the strides its producers emit, with a cold
L2. Inside the network two things it cannot see decide some choices: the layout a convolution emits makes its
consumers copy (MobileNetV3 at batch 1 on an H100: eight convolutions that flipped between NCHW and NHWC tactics
by fractions of a microsecond brought 17 layout copies, 37 µs of a 387 µs call), and a kernel's launch shape
interacts with its neighbours (six squeeze-excite GEMMs at M = 1 on TMA tiles: 29.5 µs in the network, ≈ 2.7 µs
each on skinny tiles before, where alone they tied). So:

1. Trials, in this order. *Layout groups* (`layout_groups`): for each memory layout, every layer whose winner
   has another layout switched to its fastest candidate of that layout — one layout throughout, which no single
   swap reaches. *Close calls* (`close_calls`): a timed layer whose fastest candidate of another family (the
   tactic with its structural config — layout, TMA or pointer loads, implicit GEMM — tile sizes dropped: `family`)
   timed within ``CLOSE_REL`` (25 %) + ``CLOSE_ABS_MS`` of the winner. Layers with the same timing signature and
   the same pair (a transformer's 12 identical FC1s) are swapped together: one trial, 12× the signal.
2. The network at the opt point runs as one program of the chosen kernels (`NetworkProgram`: constants and
   host values as the runtime holds them, intermediates freed after their last reader), captured as one CUDA
   graph. For each group, smallest relative gap first, the alternative is swapped in, the graph captured again,
   and both graphs replayed in alternation (`GraphPairTimer`, no L2 flush: the network's own traffic is the
   context). The swap stays when the median network time drops by more than max(``KEEP_REL`` · t, ``KEEP_ABS_MS``)
   and the network's outputs agree with the current program's within tactic validation's tolerance.
3. Decisions are recorded in the timing cache under a key of the whole network's layer signatures and choices,
   so a warm build makes the same choice without replaying anything.

Costs: per trial the alternatives' kernels, one capture and ``2 · rounds`` replays of the network (on the H200,
MobileNetV3 b1: 32 trials in 2.9 s), bounded by ``max_trials`` and ``budget_s``. Measured there (9c8bb4b): the
MobileNetV3 b1 engine 0.3081 → 0.3070 ms with its 2 swaps (bench/results/context-timing-nvidia-h200.txt); the
other zoo builds kept 0–1 swaps. Memory: two captured graphs' activations at a time plus the alternatives'
prepared weights. CUDA only (the default timer needs graphs); a network that cannot be captured (a layer
synchronising with the host) keeps its layer-by-layer choice, and the build log says so.
"""

import hashlib
import json
import time
from dataclasses import dataclass, field
from statistics import median
from typing import Callable, Protocol

import torch

from ..ir import Network
from ..kernels import candidates
from ..util.log import get_logger
from .layout_walk import LayoutWalk
from .memory_plan import host_value_inputs
from .validation import disagreement, try_capture

CLOSE_REL = 0.25           # an alternative within 25 % of the winner's isolated time …
CLOSE_ABS_MS = 0.002       # … plus 2 µs (launch-bound layers tie within a launch)
KEEP_REL = 0.002           # a swap must save 0.2 % of the network's time …
KEEP_ABS_MS = 0.0005       # … and at least 0.5 µs


STRUCTURAL = ("layout", "TMA", "IMPLICIT", "SPLIT")   # config keys that change what a kernel does, not its tiles


def _config(tactic_id: str) -> dict[str, str]:
    head, _, rest = tactic_id.partition("[")
    return dict(item.partition("=")[::2] for item in rest.rstrip("]").split(",") if item) if rest else {}


def family(tactic_id: str) -> str:
    """The tactic with its structural config (memory layout, TMA or pointer loads, implicit GEMM, split-K), tiles
    dropped: 'fusedconv.cudnn_triton_epilogue[layout=nhwc]' stays itself, 'matmulepilogue.triton_gemm[BK=64,BM=128,
    …,TMA=1]' → 'matmulepilogue.triton_gemm[TMA=1]'."""
    cfg = _config(tactic_id)
    keys = [f"{k}={cfg[k]}" for k in STRUCTURAL if k in cfg]
    return tactic_id.partition("[")[0] + (f"[{','.join(keys)}]" if keys else "")


@dataclass
class Group:
    """Layers swapped together in one trial: `to` maps each to its alternative tactic."""
    label: str
    to: dict[str, str]
    gap: float                  # (t_alternative − t_chosen) / t_chosen, isolated (summed over the group)

    @property
    def layers(self) -> list[str]:
        return list(self.to)


def close_calls(layer_times: dict[str, tuple[str, dict[str, float]]], chosen: dict[str, str],
                rel: float = CLOSE_REL, abs_ms: float = CLOSE_ABS_MS) -> list[Group]:
    """Groups of close calls, smallest relative gap first. `layer_times`: layer → (signature key, tactic → ms);
    `chosen`: layer → its tactic now. Layers of one signature with the same (chosen, alternative) pair form one
    group. A layer whose chosen tactic has no time (cache entry of another set) is left alone."""
    groups: dict[tuple, tuple[dict, float, float]] = {}
    for name, (key, times) in layer_times.items():
        best = chosen.get(name)
        if best not in times:
            continue
        others = {t: ms for t, ms in times.items() if family(t) != family(best)}
        if not others:
            continue
        alt = min(others, key=others.get)
        if others[alt] > times[best] * (1 + rel) + abs_ms:
            continue
        to, t_best, t_alt = groups.get((key, best, alt), ({}, 0.0, 0.0))
        to[name] = alt
        groups[(key, best, alt)] = (to, t_best + times[best], t_alt + others[alt])
    out = [Group(f"{best} → {alt}", to, (t_alt - t_best) / max(t_best, 1e-9))
           for (_, best, alt), (to, t_best, t_alt) in groups.items()]
    return sorted(out, key=lambda g: (g.gap, g.layers[0]))


def layout_groups(layer_times: dict, chosen: dict[str, str], rel: float = 0.5, abs_ms: float = 0.005) -> list[Group]:
    """One group per memory layout L: every layer whose chosen tactic has another layout switched to its fastest
    candidate of layout L (within 50 % + 5 µs of its winner alone). Layer-by-layer choice mixes NCHW and NHWC
    convolutions by fractions of a microsecond and pays a layout copy at every boundary; one layout throughout is
    the plan a single swap cannot reach."""
    layouts = {_config(t).get("layout") for _, times in layer_times.values() for t in times} - {None}
    out = []
    for target in sorted(layouts):
        to, t_best, t_alt = {}, 0.0, 0.0
        for name, (_, times) in layer_times.items():
            best = chosen.get(name)
            if best not in times or _config(best).get("layout") in (None, target):
                continue
            same = {t: ms for t, ms in times.items() if _config(t).get("layout") == target}
            if not same:
                continue
            alt = min(same, key=same.get)
            if same[alt] <= times[best] * (1 + rel) + abs_ms:
                to[name] = alt
                t_best, t_alt = t_best + times[best], t_alt + same[alt]
        if to:
            out.append(Group(f"layout={target} throughout ({len(to)} layers)", to, (t_alt - t_best) / max(t_best, 1e-9)))
    return out


class NetworkProgram:
    """The network's device layers as one callable at the opt point: `run()` → the network's outputs.

    Inputs not produced by a device layer are fixed once: network inputs random (LayoutWalk's fill), known values
    (constants, shape arithmetic of host layers) on the device, or on the host where the op reads them as values
    (memory_plan.host_value_inputs, as the runtime hands them over). Memory: the fixed tensors, plus the
    intermediates alive at each step (each freed after its last reader, as the runtime frees its slots)."""

    def __init__(self, net: Network, walk: LayoutWalk, kernels: dict[str, Callable], choice: dict[str, str]):
        self.net, self.kernels, self.choice = net, dict(kernels), dict(choice)   # layer → kernel, tactic id
        device_layers = [layer for layer in net.layers if layer.placement != "host"]
        produced = {o for layer in device_layers for o in layer.outputs if o}
        on_host = host_value_inputs(net)
        self.fixed: dict[tuple[str, bool], torch.Tensor] = {}
        self.steps = []
        last: dict[str, int] = {}
        for index, layer in enumerate(device_layers):
            for i in layer.inputs:
                if i:
                    last[i] = index
        keep = set(net.outputs)
        for index, layer in enumerate(device_layers):
            ins = []
            for pos, name in enumerate(layer.inputs):
                if not name:
                    ins.append(None)
                elif name in produced:
                    ins.append(name)
                else:
                    host = pos in on_host.get(layer.name, ())
                    if (name, host) not in self.fixed:
                        self.fixed[(name, host)] = walk.tensor(name, host=host)
                    ins.append((name, host))
            frees = [n for n, at in last.items() if at == index and n in produced and n not in keep]
            self.steps.append((layer.name, ins, [o for o in layer.outputs], frees))
        self.outputs = [(o, o in produced) for o in net.outputs]
        self._host_out = {o: walk.tensor(o, host=True) for o, dev in self.outputs if not dev}

    def with_kernels(self, swap: dict[str, Callable], tactics: dict[str, str]) -> "NetworkProgram":
        """The same program with the layers of `swap` running its kernels, of `tactics` (fixed tensors shared)."""
        other = object.__new__(NetworkProgram)
        other.__dict__.update(self.__dict__)
        other.kernels = {**self.kernels, **swap}
        other.choice = {**self.choice, **tactics}
        return other

    def run(self, each: Callable | None = None) -> list:
        """The network's outputs. `each(layer_name, call)`, when given, makes each layer's call (`call()` → its
        outputs) and returns what it returns: graph_probe.py watches each layer's call this way."""
        vals: dict[str, torch.Tensor] = {}
        for name, ins, outs, frees in self.steps:
            args = [None if i is None else self.fixed[i] if isinstance(i, tuple) else vals[i] for i in ins]
            kernel = self.kernels[name]
            results = kernel(args) if each is None else each(name, lambda: kernel(args))
            for o, t in zip(outs, results):
                if o:
                    vals[o] = t
            for n in frees:
                vals.pop(n, None)
        return [vals[o] if dev else self._host_out[o] for o, dev in self.outputs]


class PairTimer(Protocol):
    def compare(self, a: NetworkProgram, b: NetworkProgram) -> tuple[float, float] | None: ...


class GraphPairTimer:
    """Median ms of programs `a` and `b`, each captured in a CUDA graph and replayed in alternation `rounds`
    times (alternation cancels clock and thermal drift between the two). None when either cannot be captured."""

    def __init__(self, device: torch.device, rounds: int = 30, warmup: int = 3):
        self.device, self.rounds, self.warmup = device, rounds, warmup
        self._graphs: dict[NetworkProgram, object] = {}     # keyed by the program object (identity)

    def _graph(self, prog: NetworkProgram, stream):
        if prog not in self._graphs:
            for _ in range(self.warmup):
                prog.run()
            self._graphs[prog] = try_capture(prog.run, stream)
        return self._graphs[prog]

    def keep_only(self, prog: NetworkProgram) -> None:
        """Drop captured graphs other than `prog`'s (their memory pools go with them)."""
        self._graphs = {k: v for k, v in self._graphs.items() if k is prog}

    def compare(self, a: NetworkProgram, b: NetworkProgram) -> tuple[float, float] | None:
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            ga, gb = self._graph(a, stream), self._graph(b, stream)
            if ga is None or gb is None:
                return None
            events = [[torch.cuda.Event(enable_timing=True) for _ in range(4)] for _ in range(self.rounds)]
            for ev in events:
                ev[0].record(); ga.replay(); ev[1].record()
                ev[2].record(); gb.replay(); ev[3].record()
        torch.cuda.synchronize(self.device)
        return (median(e[0].elapsed_time(e[1]) for e in events), median(e[2].elapsed_time(e[3]) for e in events))


@dataclass
class ContextReport:
    groups: int = 0                 # close-call groups found
    trials: int = 0                 # groups timed in the network
    kept: list[dict] = field(default_factory=list)   # {swap (label), layers, saved_ms} per kept group
    base_ms: float | None = None    # the network with the layer-by-layer choice (first trial's replays)
    seconds: float = 0.0
    skipped: str | None = None      # why nothing was timed
    from_cache: bool = False

    @property
    def final_ms(self) -> float | None:
        """base_ms less the kept swaps' savings (each measured against the program before it)."""
        return None if self.base_ms is None else self.base_ms - sum(k["saved_ms"] for k in self.kept)

    def as_dict(self) -> dict:
        return {k: v for k, v in {"groups": self.groups, "trials": self.trials, "kept": self.kept,
                                  "base_ms": self.base_ms, "final_ms": self.final_ms,
                                  "seconds": round(self.seconds, 3), "skipped": self.skipped,
                                  "from_cache": self.from_cache or None}.items() if v not in (None, [])}


def network_key(net: Network, layer_times: dict, chosen: dict[str, str]) -> str:
    """Timing-cache key of a whole network's context decision: its timed layers' signatures and choices."""
    text = json.dumps([[layer.name, layer_times[layer.name][0], chosen[layer.name]]
                       for layer in net.layers if layer.name in layer_times], separators=(",", ":"))
    return "context:" + hashlib.sha256(text.encode()).hexdigest()[:32]


def build_kernel(layer, tactic_id: str, device):
    """The kernel of candidate `tactic_id` for `layer` (the registry's (tactic, config) pair with that id)."""
    for tac, cfg in candidates(layer, device)[0]:
        if tac.id(cfg) == tactic_id:
            return tac.build(layer, cfg, device)
    raise KeyError(f"tactic {tactic_id} is not a candidate of layer {layer.name}")


def network_program(net: Network, walk: LayoutWalk, chosen: dict[str, str] | None = None) -> NetworkProgram:
    """The network's device layers with the kernels of `chosen` (layer → tactic id; default: each layer's tactic)
    as one NetworkProgram."""
    chosen = chosen if chosen is not None else {layer.name: layer.tactic for layer in net.layers}
    by_name = {layer.name: layer for layer in net.layers}
    kernels = {n: build_kernel(by_name[n], t, walk.device) for n, t in chosen.items() if by_name[n].placement != "host"}
    return NetworkProgram(net, walk, kernels, chosen)


def refine_in_context(net: Network, walk: LayoutWalk, layer_times: dict, timer: PairTimer, tf32: bool,
                      cache=None, dev_key: str = "", max_trials: int = 32, budget_s: float = 2.5) -> ContextReport:
    """Swap close calls' alternatives in where the whole network runs faster (module docstring); sets
    `layer.tactic` of the layers it swaps. `layer_times`: layer → (signature key, tactic → isolated ms).
    An optional refinement: whatever fails in it ends it with a warning, and the choice so far stands (every
    swap already made was timed and checked)."""
    rep = ContextReport()
    try:
        return _refine(net, walk, layer_times, timer, tf32, cache, dev_key, max_trials, budget_s, rep)
    except Exception as e:  # noqa: BLE001 - never fails a build; said in the log and in the report
        rep.skipped = f"failed: {type(e).__name__}: {(str(e).splitlines() or [''])[0]}"
        get_logger().warning(f"network-context timing {rep.skipped}; the layer-by-layer choice stands")
        return rep


def _refine(net, walk, layer_times, timer, tf32, cache, dev_key, max_trials, budget_s, rep) -> ContextReport:
    log = get_logger()
    t0 = time.perf_counter()
    by_name = {layer.name: layer for layer in net.layers}
    chosen = {layer.name: layer.tactic for layer in net.layers}
    groups = layout_groups(layer_times, chosen) + close_calls(layer_times, chosen)
    rep.groups = len(groups)
    if not groups:
        rep.skipped = "no close calls"
        return rep
    key = network_key(net, layer_times, chosen)
    entry = cache.lookup(dev_key, key) if cache is not None else None
    if entry is not None and isinstance(entry.get("swaps"), dict):
        for name, tid in entry["swaps"].items():
            if name in by_name and tid in layer_times.get(name, ("", {}))[1]:
                by_name[name].tactic = tid
        rep.from_cache, rep.kept = True, list(entry.get("kept", []))
        rep.base_ms = entry.get("base_ms")
        log.info(f"network-context timing: {len(entry['swaps'])} swap(s) from the timing cache")
        return rep
    device = walk.device
    try:
        current = network_program(net, walk, chosen)
        reference = current.run()
    except Exception as e:  # noqa: BLE001 - a speed refinement: the layer-by-layer choice stands, and the log says why
        rep.skipped = f"the network did not run as one program: {type(e).__name__}: {(str(e).splitlines() or [''])[0]}"
        log.info(f"network-context timing skipped: {rep.skipped}")
        return rep
    swaps: dict[str, str] = {}
    for g in groups:
        if rep.trials >= max_trials or time.perf_counter() - t0 > budget_s:
            break
        try:
            trial = current.with_kernels({n: build_kernel(by_name[n], t, device) for n, t in g.to.items()}, g.to)
            outs = trial.run()
        except Exception as e:  # noqa: BLE001 - this alternative does not run in the network: not swapped
            log.verbose(f"network-context: {g.label} failed in the network: {e}")
            continue
        wrong = disagreement(outs, reference, tf32)
        if wrong is not None:
            log.verbose(f"network-context: {g.label} changes the outputs: {wrong}")
            continue
        try:
            times = timer.compare(current, trial)
        except Exception as e:  # noqa: BLE001 - e.g. out of memory for a second graph: the choice so far stands
            rep.skipped = f"timing the network failed: {type(e).__name__}: {(str(e).splitlines() or [''])[0]}"
            log.info(f"network-context timing stopped: {rep.skipped}")
            break
        rep.trials += 1
        if times is None:
            rep.skipped = "the network cannot be captured in a CUDA graph (a layer synchronises with the host)"
            log.info(f"network-context timing skipped: {rep.skipped}")
            break
        t_cur, t_new = times
        rep.base_ms = rep.base_ms if rep.base_ms is not None else t_cur
        if t_cur - t_new > max(KEEP_REL * t_cur, KEEP_ABS_MS):
            for n, t in g.to.items():
                by_name[n].tactic = swaps[n] = t
            rep.kept.append({"swap": g.label, "layers": g.layers, "saved_ms": round(t_cur - t_new, 5)})
            current = trial
            log.verbose(f"network-context: {g.label} ({len(g.to)} layer(s), first {g.layers[0]}): "
                        f"network {t_cur:.4f} → {t_new:.4f} ms")
        if hasattr(timer, "keep_only"):
            timer.keep_only(current)
    rep.seconds = time.perf_counter() - t0
    if rep.trials and rep.skipped is None:
        log.info(f"network-context timing: {rep.trials} of {rep.groups} close call(s) timed in the network, "
                 f"{len(rep.kept)} swap(s) kept, {rep.base_ms:.4f} → {rep.final_ms:.4f} ms, {rep.seconds:.2f} s")
        if cache is not None:
            cache.record(dev_key, key, {"op": "NetworkContext", "best": f"{len(swaps)} swap(s)", "swaps": swaps,
                                        "kept": rep.kept, "base_ms": rep.base_ms, "final_ms": rep.final_ms,
                                        "times_ms": {}})
    return rep
