"""build_engine(network, config) → Engine.

    profiles ─► passes (fold, fuse) ─► precision ─► infer shapes at every profile point
             ─► placement ─► tactic per layer ─► Engine

Shape inference runs the IR references on meta tensors (no compute) at min/opt/max of every profile; a
dimension that differs between points is stored as -1. A layer whose outputs are known values at every
point (shape arithmetic on dynamic dims) is placed on the host, so the device never waits on tiny int ops.
"""

import time
from dataclasses import replace

import torch

from ..engine import Engine
from ..ir import Network, TensorInfo, dtype_name
from ..ir.interpret import InferenceFailure, clear_memo, propagate
from ..ir.dynamic import placeholder_info
from ..ir.verifier import problems
from ..passes import optimize
from ..codegen import generate_kernel_sources
from ..kernels.generated import register_source
from ..kernels.compile_cache import prestart, release, workers_from_env
from ..plugin import engine_records
from ..util.device import fingerprint, resolve_device
from ..util.errors import BuildError
from ..util.log import get_logger
from ..version import __version__
from .config import BuilderConfig
from . import precision_step
from .profiles import resolve_profiles, shape_points
from .memory_plan import plan_network
from .point_tactics import choose_point_tactics
from .tactics import choose_tactics
from .context_timing import GraphPairTimer, network_program, refine_in_context
from .best import compare_with_fp16, verdict_line
from .graph_probe import detector_for, graph_capture_report


def _infer(net: Network, points: list[dict], max_fold: int, keep: list | None = None) -> tuple[dict[str, TensorInfo], set[str]]:
    """Shapes/dtypes of every tensor (dims -1 where points disagree) and the names known at every point.
    `keep` receives the propagated tensors of every point (tactic timing and the memory plan reuse them)."""
    envs = keep if keep is not None else []
    for point in points:
        try:
            envs.append(propagate(net, point, max_fold))
        except InferenceFailure as e:
            shapes = ", ".join(f"{k}={'x'.join(map(str, v))}" for k, v in point.items())
            raise BuildError(f"shape inference failed at {shapes}: {e}",
                             "check the input shapes; run with --verbose for details") from e
    infos: dict[str, TensorInfo] = {}
    host: set[str] = set()
    for name in envs[0]:
        ts = [env[name] for env in envs]
        ranks = {t.dim() for t in ts}
        if len(ranks) != 1:
            shape = None
        else:
            shape = tuple(ts[0].shape[d] if all(t.shape[d] == ts[0].shape[d] for t in ts) else -1
                          for d in range(ts[0].dim()))
        dtype, ph = ts[0].dtype, [placeholder_info(t) for t in ts]
        if any(ph):   # known only at run time (ir/dynamic.py): every dim -1; rank/dtype only where known
            shape = (-1,) * ts[0].dim() if all(p is None or p.rank_known for p in ph) and len(ranks) == 1 else None
            if not all(p is None or p.dtype_known for p in ph):
                dtype = net.tensors[name].dtype if name in net.tensors else None
        infos[name] = TensorInfo(name, dtype, tuple(int(d) for d in shape) if shape is not None else None)
        if all(t.device.type != "meta" for t in ts):
            host.add(name)
    return infos, host


def tf32_note(config: BuilderConfig, device) -> str | None:
    """The build-log line for CUDA builds whose fp32 layers may run in TF32 (trtexec's default; 10-bit mantissa
    products): what it costs in accuracy and how to turn it off. None where TF32 does not apply."""
    if getattr(device, "type", str(device)) != "cuda" or not config.tf32:
        return None
    return ("TF32 on for fp32 matmul/conv layers (trtexec's default): expect errors up to ~1e-2 of the output's "
            "maximum against fp32 (resnet50 on the H200: 2.3e-2); --noTF32 / tf32=False gives fp32 accuracy")


def _context_step(config: BuilderConfig, device):
    """Network-context timing of the opt point's close calls (context_timing.py): CUDA builds at optimisation
    level ≥ 3 (the default) with `config.context_timing`; None elsewhere (levels 1–2 keep the layer-by-layer
    choice, as does a CPU build, whose timer has no graphs)."""
    if getattr(device, "type", "") != "cuda" or config.optimization_level < 3 or not config.context_timing:
        return None

    def step(net, walk, cache, dev_key, report):
        report.context = refine_in_context(net, walk, report.times, GraphPairTimer(device), config.tf32,
                                           cache, dev_key).as_dict()
    return step


def build_engine(network: Network, config: BuilderConfig | None = None, progress=None,
                 programs: list | None = None) -> Engine:
    """The build (module docstring). A CUDA build that will time tactics spawns its Triton compile workers first
    (compile_cache.prestart): they import torch and Triton while this process parses and rewrites the network.
    `programs`: a list the build appends its whole network at the opt point to, as one NetworkProgram, once every
    layer has its tactic (timed CUDA builds): --best's FP16 trial hands its network to the final build this way."""
    config = config or BuilderConfig()
    device = resolve_device(config.device)
    early = None
    if device.type == "cuda" and config.optimization_level > 0:
        early = prestart(fingerprint(device), workers_from_env())
    try:
        return _build(network, config, device, progress, programs)
    finally:
        release(early)          # taken over by the build's tactic choice, unless it failed before


def _after_choice(config: BuilderConfig, device, programs: list | None):
    """choose_tactics' `after_choice` (timed builds): the network-context step, then the chosen network made into
    one NetworkProgram, appended to `programs` when that is a list (--best's comparison) and, on CUDA, run once
    layer by layer to find the layers that keep the engine out of CUDA graphs (graph_probe.py:
    `report.graph_capture`)."""
    context = _context_step(config, device)
    detect = detector_for(device)
    if programs is None and detect is None:
        return context

    def step(net, walk, cache, dev_key, report):
        if context is not None:
            context(net, walk, cache, dev_key, report)
        try:
            program = network_program(net, walk)
        except Exception as e:  # noqa: BLE001 - --best's comparison and the graph check say so and go on
            get_logger().info(f"whole-network program not made ({type(e).__name__}: {e}); --best keeps its choice "
                              "and the CUDA-graph check is not made")
            program = None
        if programs is not None and program is not None:
            programs.append(program)
        if detect is not None:
            report.graph_capture = graph_capture_report(net, program, device, detect)
    return step


def _fp16_instead(config: BuilderConfig, prec, net: Network, seconds: float) -> Engine:
    """--best's FP16 trial engine in place of the slower mixed one (best.compare_with_fp16), its build info
    saying so; the precision constraints are still checked (precision_step.finish)."""
    precision_step.finish(config, prec, net)
    choice = prec.best
    engine = choice.fp16_engine
    info = {**engine.build_info, "flags": config.flags(), "build_seconds": round(seconds, 3),
            "best": {**choice.verdict, "fp16_layers": "all", "costs_ms": choice.costs_ms()}}
    return replace(engine, build_info=info)


def _build(network: Network, config: BuilderConfig, device, progress, programs: list | None = None) -> Engine:
    log = get_logger()
    t0 = time.perf_counter()
    note = tf32_note(config, device)
    if note:
        log.info(note)
    clear_memo()
    phases: dict[str, float] = {}           # seconds per build step (build_info["phases"]: where a cold build goes)
    mark = [time.perf_counter()]

    def phase(name: str) -> None:
        now = time.perf_counter()
        phases[name] = round(phases.get(name, 0.0) + now - mark[0], 3)
        mark[0] = now
    found = problems(network)
    if found:
        raise BuildError(f"network {network.name!r} is malformed: {found[0]}", "fix the network definition")
    net = network.copy()
    resolved = resolve_profiles(net, config.profiles)
    points = shape_points(resolved)
    prec = precision_step.begin(net, config)
    precision_step.quantize(net, config, device, points, prec, build_engine)   # --int8/--fp8/--best: Q/DQ layers
    phase("precision")

    try:    # constant folding evaluates every layer: a bad shape/axes/k value surfaces here first
        report = optimize(net, points, config.optimization_level, max_fold_elements=config.max_fold_elements)
    except InferenceFailure as e:
        raise BuildError(f"shape inference failed: {e}", "check the model's shape, axes and size values") from e
    log.verbose(f"passes: {report}")
    phase("passes")

    before, _ = _infer(net, points[:1], config.max_fold_elements)
    precision_step.convert(net, config, points, {o: before[o].dtype for o in net.outputs}, prec)
    report.update(optimize(net, points, config.optimization_level, stage="late",     # dtypes final: chains
                           max_fold_elements=config.max_fold_elements))

    phase("passes")
    envs: list[dict] = []
    infos, host = _infer(net, points, config.max_fold_elements, keep=envs)
    net.tensors.update(infos)
    phase("shapes")
    for text in generate_kernel_sources(net).values():   # codegen/: one Triton source per PointwiseChain, its hash
        register_source(text)                            # in the layer; the engine stores no text (runtime regenerates)
    for layer in net.layers:
        outs = [o for o in layer.outputs if o]
        layer.placement = "host" if outs and all(o in host for o in outs) else "device"
        if layer.precision is None:
            dts = {infos[o].dtype for o in outs if o in infos}
            layer.precision = dtype_name(next(iter(dts))) if len(dts) == 1 else "mixed"

    phase("codegen")
    opt_point = {n: s[1] for n, s in resolved[0].items()}
    guard = prec.best is not None and prec.best.fp16_program is not None     # --best vs its FP16 engine
    mine = [] if guard else programs
    tactic_report = choose_tactics(net, device, config, progress=progress, opt_point=opt_point,
                                   opt_env=envs[points.index(opt_point)],
                                   after_choice=_after_choice(config, device, mine))
    phase("tactics")
    if guard:
        prec.best.verdict = compare_with_fp16(prec.best, mine[0] if mine else None, GraphPairTimer(device))
        log.info(verdict_line(prec.best.verdict))
        if prec.best.verdict["kept"] == "fp16":
            return _fp16_instead(config, prec, net, time.perf_counter() - t0)
        prec.best.fp16_engine = None
    tactic_report.per_point = choose_point_tactics(net, device, config, resolved, points, envs, choose_tactics,
                                                    timed=tactic_report.timed_layers + tactic_report.cache_hits > 0,
                                                    progress=progress)
    phase("point_tactics")
    max_points = [{n: s[2] for n, s in p.items()} for p in resolved]
    memory = plan_network(net, max_points, config.max_fold_elements, envs=[envs[points.index(p)] for p in max_points])
    log.info(f"activation memory: planned peak {memory.peak_bytes / 2**20:.1f} MiB "
             f"(naive sum {memory.naive_bytes / 2**20:.1f} MiB)")

    inputs = [TensorInfo(n, net.tensors[n].dtype, net.tensors[n].shape) for n in net.inputs]
    outputs = [TensorInfo(n, net.tensors[n].dtype, net.tensors[n].shape) for n in net.outputs]
    precision_info = precision_step.finish(config, prec, net)
    phase("memory_plan")
    build_time = time.perf_counter() - t0
    build_info = {**precision_info, "device": fingerprint(device), "flags": config.flags(), "tensorforge_version": __version__,
                  "torch_version": torch.__version__, "build_seconds": round(build_time, 3),
                  "optimization_level": config.optimization_level, "passes": report,
                  "tactics": tactic_report.as_dict(), "memory": memory.as_dict(), "phases": phases,
                  "graph_capture": tactic_report.graph_capture or graph_capture_report(net, None, device,
                                                                                       detector_for(device))}
    log.info(f"built engine {net.name!r}: {len(net.layers)} layers in {build_time:.2f} s")
    return Engine(net.name, inputs, outputs, [dict(p) for p in resolved], net.layers, dict(net.tensors),
                  dict(net.constants), engine_records(net.layers), build_info)
