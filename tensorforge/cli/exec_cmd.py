"""`tensorforge exec`: trtexec's workflow — build (or load) an engine, save it, benchmark it, report.

Entry point: `run(argv) -> exit code` (called by cli/main.py, which turns errors into one line on stderr).
Flow: flags (trtexec_flags.py) → checks → parse ONNX + build (progress shown) or load the engine file →
atomic --saveEngine → inference shapes and inputs (io_files.py) → timing loop (inference_bench.py) →
trtexec's log and `=== Performance summary ===` (perf_report.py) → exports. The log goes to stdout,
framed by `&&&& RUNNING …` and `&&&& PASSED …`/`&&&& FAILED …` as trtexec frames it.
"""

import os
import sys
import time

import torch

from ..builder import BuilderConfig, OptimizationProfile, build_engine
from ..engine import from_bytes, to_bytes
from ..parser import parse_model
from ..plugin import load as load_plugins
from ..runtime import ExecutionContext
from ..util.cpu_threads import cpu_threads
from ..util.device import resolve_device
from ..util.errors import ShapeError, UsageError
from ..util.fileio import read_bytes
from ..util.log import Severity, get_logger
from ..version import __version__
from . import exec_precision, io_files, perf_report
from .exec_runtime import after_benchmark, describe_context, report_layer_info
from .inference_bench import benchmark, make_runner
from .shapes_arg import check_in_profiles, format_shape
from .trtexec_flags import FLAGS, SWITCH_FORMS, ExecOptions, help_text, parse_argv

_BUILD_ONLY = ("--minShapes", "--optShapes", "--maxShapes", "--fp16", "--bf16", "--builderOptimizationLevel",
               "--profile", "--workspace", "--errorOnTimingCacheMiss", "--inputIOFormats", "--outputIOFormats",
               *exec_precision.FLAGS)
_RUN_ONLY = [f.name for f in FLAGS.values() if not f.refused and
             (f.section == "Inference" and f.name != "--shapes" or f.section == "Reporting" and
              f.name not in ("--verbose", "--dumpLayerInfo", "--exportLayerInfo",
                                         "--dumpOptimizationProfile"))]


class ExecLog:
    """trtexec-style lines on stdout: `[11/30/2026-11:36:12] [I] message`."""

    def __init__(self, verbose: bool):
        self.verbose_on = verbose

    def _emit(self, tag: str, msg: str) -> None:
        print(f"[{time.strftime('%m/%d/%Y-%H:%M:%S')}] [{tag}] {msg}", file=sys.stdout, flush=True)

    def info(self, msg=""): self._emit("I", msg)
    def warn(self, msg): self._emit("W", msg)

    def verbose(self, msg):
        if self.verbose_on:
            self._emit("V", msg)


class BuildProgress:
    """Tactic-choice progress: a rich bar (layers with a tactic / layers, elapsed) on a terminal, plain verbose
    lines otherwise. The builder calls `begin(n)` once the graph passes have run, then this once per layer."""

    def __init__(self, log: ExecLog):
        self.log, self.count, self._bar = log, 0, None

    def __enter__(self):
        if sys.stdout.isatty():
            from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
            self._bar = Progress(SpinnerColumn(), TextColumn("building: {task.description}"), BarColumn(),
                                 TextColumn("{task.completed}/{task.total} layers"), TimeElapsedColumn(),
                                 transient=True)
            self._bar.start()
            self._task = self._bar.add_task("choosing tactics", total=None)
        return self

    def begin(self, num_layers: int) -> None:
        self.log.verbose(f"choosing tactics for {num_layers} layers")
        if self._bar is not None:
            self._bar.update(self._task, total=num_layers)

    def timing(self, layer, candidates: int) -> None:
        """Called before a layer's candidates are compiled and timed: the bar names it."""
        if self._bar is not None:
            from rich.markup import escape
            self._bar.update(self._task, description=escape(f"timing {layer.name} ({layer.op}, {candidates} candidates)"))

    def __call__(self, layer, *_):
        self.count += 1
        if hasattr(layer, "tactic"):
            self.log.verbose(f"layer {layer.name} ({layer.op}): tactic {layer.tactic}")
        if self._bar is not None:
            self._bar.update(self._task, completed=self.count)

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.stop()
        return False


class _CurrentStdout:
    """A stream that writes to whatever sys.stdout is now (rich's progress display swaps it while it runs)."""

    def write(self, text):
        return sys.stdout.write(text)

    def flush(self):
        sys.stdout.flush()


def _set_tf32(enabled: bool) -> tuple[bool, bool]:
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    if not enabled:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    return before


def run(argv) -> int:
    argv = list(argv)
    if "--help" in argv or "-h" in argv:
        print(help_text())
        return 0
    banner = f"TensorRT.trtexec [TensorForge v{__version__}] # tensorforge exec {' '.join(argv)}"
    print(f"&&&& RUNNING {banner}", flush=True)
    lib_log = get_logger()
    saved_log = (lib_log.stream, lib_log.min_severity)
    saved_tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        opts = parse_argv(argv)
        lib_log.stream = _CurrentStdout()
        lib_log.min_severity = Severity.VERBOSE if opts.verbose else Severity.INFO
        _set_tf32(opts.tf32)
        _execute(opts, ExecLog(opts.verbose))
    except BaseException:
        print(f"&&&& FAILED {banner}", flush=True)
        raise
    finally:
        lib_log.stream, lib_log.min_severity = saved_log
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved_tf32
    print(f"&&&& PASSED {banner}", flush=True)
    return 0


def _check(opts: ExecOptions) -> None:
    if not opts.onnx and not opts.load_engine:
        raise UsageError("no model given", "build with --onnx=model.onnx, or run a saved engine with --loadEngine=FILE")
    if opts.onnx and opts.load_engine:
        raise UsageError("--onnx and --loadEngine are both given", "give one: --onnx builds, --loadEngine runs a saved engine")
    if opts.load_engine:
        for name in _BUILD_ONLY:
            if name in opts.given:
                raise UsageError(f"{name} is a build option and has no effect with --loadEngine",
                                 "rebuild from --onnx with it, or drop it")
    _check_profile(opts.min_shapes, opts.opt_shapes, opts.max_shapes, "")
    if opts.more_profiles and not opts.opt_shapes:
        raise UsageError("--profile=0 has no shapes", "give --minShapes/--optShapes/--maxShapes after --profile=0")
    for k, prof in enumerate(opts.more_profiles, 1):
        if not prof["opt"]:
            raise UsageError(f"--profile={k} has no shapes", f"give --minShapes/--optShapes/--maxShapes after --profile={k}")
        _check_profile(prof["min"], prof["opt"], prof["max"], f" (profile {k})")
    exec_precision.check(opts)
    if opts.skip_inference:
        for name in _RUN_ONLY:
            if name in opts.given:
                raise UsageError(f"{name} has no effect with --skipInference", "drop one of them")
    for path, what in ((opts.save_engine, "engine file"), (opts.export_times, "times file"),
                       (opts.export_output, "output file"), (opts.export_profile, "profile file"),
                       (opts.export_layer_info, "layer information file")):
        if path:
            io_files.check_writable(path, what)


def _check_profile(mins: dict, opts_: dict, maxs: dict, where: str) -> None:
    given = [bool(mins), bool(opts_), bool(maxs)]
    if any(given) and given != [False, True, False] and not all(given):
        raise UsageError(f"give only --optShapes, or all of --minShapes, --optShapes and --maxShapes{where}",
                         "trtexec's rule: min and max default to opt only when both are absent")
    if all(given):
        for flag, ns in (("--minShapes", set(mins)), ("--maxShapes", set(maxs))):
            if ns != set(opts_):
                odd = sorted(ns ^ set(opts_))[0]
                raise UsageError(f"input {odd!r} is in only one of {flag} and --optShapes{where}",
                                 "give every dynamic input in all three")


def _one_profile(mins: dict, opts_: dict, maxs: dict) -> OptimizationProfile:
    prof = OptimizationProfile()
    for name, opt in opts_.items():
        prof.set_shape(name, mins.get(name, opt), opt, maxs.get(name, opt))
    return prof


def _profiles(opts: ExecOptions) -> list[OptimizationProfile]:
    """min/opt/max → profile 0, each --profile=N ≥ 1 → one more; only --shapes → a static profile at those shapes
    (trtexec's rule)."""
    if opts.opt_shapes:
        return [_one_profile(opts.min_shapes, opts.opt_shapes, opts.max_shapes),
                *(_one_profile(p["min"], p["opt"], p["max"]) for p in opts.more_profiles)]
    if opts.shapes:
        return [_one_profile({}, opts.shapes, {})]
    return []


def _no_effect_lines(opts: ExecOptions, device, log: ExecLog) -> None:
    """Flags accepted for compatibility that change nothing here: say so once, then go on."""
    if "--workspace" in opts.given:
        log.warn("--workspace is deprecated (trtexec 8.x); read as --memPoolSize=workspace:"
                 f"{opts.workspace_bytes / 2**20:g}M")
    if opts.use_cuda_graph and device.type != "cuda":
        log.warn(f"--useCudaGraph does not apply on {device.type}: there are no CUDA graphs there; running without")
        opts.use_cuda_graph = None
    for flag in opts.compat:
        why = SWITCH_FORMS[flag] if flag in SWITCH_FORMS else FLAGS[flag].help.removeprefix("no-op: ")
        log.info(f"{flag} has no effect here: {why}")


def _execute(opts: ExecOptions, log: ExecLog) -> None:
    _check(opts)
    for source in opts.plugins:            # before parsing or loading: both need the plugins registered
        log.info(f"Loading plugins from {source}: {', '.join(load_plugins(source)) or 'none'}")
    device = resolve_device(opts.device)
    _no_effect_lines(opts, device, log)
    profiles = _profiles(opts)
    for line in perf_report.option_lines(opts, profiles) + perf_report.device_lines(device):
        log.info(line)
    for k, prof in enumerate(profiles[1:], 1):
        for name, (mn, opt, mx) in prof.shapes.items():
            log.info(f"Input build shape (profile {k}): {name}={format_shape(mn)}+{format_shape(opt)}+{format_shape(mx)}")
    engine = _build(opts, profiles, device, log) if opts.onnx else _load(opts, log)
    _check_io_formats(engine, opts)
    if opts.time_deserialize:
        _time_deserialize(engine, log)
    report_layer_info(engine, opts, log)
    if opts.dump_optimization_profile:
        for k, prof in enumerate(engine.profiles):
            for name, (mn, opt, mx) in prof.items():
                log.info(f"Optimization profile {k}: {name} min {format_shape(mn)} opt {format_shape(opt)} "
                         f"max {format_shape(mx)}")
    if opts.skip_inference:
        log.info("Skipped inference phase since --skipInference is added.")
        return
    if "noTF32" in engine.build_info.get("flags", []):
        _set_tf32(False)
    _inference(engine, opts, device, log)


def _check_io_formats(engine, opts) -> None:
    """--inputIOFormats/--outputIOFormats: accepted where each names the tensor's own dtype (linear layout)."""
    for flag, formats, infos in (("--inputIOFormats", opts.input_formats, engine.inputs),
                                 ("--outputIOFormats", opts.output_formats, engine.outputs)):
        if not formats:
            continue
        if len(formats) not in (1, len(infos)):
            raise UsageError(f"{flag} gives {len(formats)} formats for {len(infos)} tensors",
                             f"give one type:format per tensor, or one for all ({flag}=fp32:chw)")
        for k, info in enumerate(infos):
            want, _ = formats[k if len(formats) > 1 else 0]
            have = str(info.dtype).removeprefix("torch.")
            if want != have:
                raise UsageError(f"{flag}: tensor {info.name!r} is {have} in the model; {want} I/O is not implemented "
                                 "(engine inputs and outputs keep the model's dtypes)",
                                 f"drop {flag}, or cast in the model (--fp16 computes inside in float16 anyway)")


def _time_deserialize(engine, log) -> None:
    data = to_bytes(engine)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        from_bytes(data, "the engine")
        times.append((time.perf_counter() - t0) * 1e3)
    log.info(f"Total deserialization time = {sorted(times)[2]:.6g} milliseconds (median of 5, "
             f"{len(data) / 2**20:.6g} MiB)")


def _build(opts, profiles, device, log):
    log.info("Start parsing network model.")
    t0 = time.perf_counter()
    network = parse_model(opts.onnx)
    log.info(f"Finished parsing network model. Parse time: {time.perf_counter() - t0:.6g}")
    log.info(f"Network {network.name!r}: {len(network.inputs)} input(s), {len(network.outputs)} output(s), "
             f"{len(network.layers)} layers")
    config = BuilderConfig(fp16=opts.fp16, bf16=opts.bf16, tf32=opts.tf32, profiles=profiles,
                           optimization_level=opts.optimization_level, device=str(device),
                           timing_cache_path=opts.timing_cache_file, use_timing_cache=opts.use_timing_cache,
                           workspace_bytes=opts.workspace_bytes,
                           error_on_timing_cache_miss=opts.error_on_cache_miss)
    exec_precision.apply(opts, config, log)
    t0 = time.perf_counter()
    with BuildProgress(log) as progress, cpu_threads(opts.threads):
        built = build_engine(network, config, progress=progress)
    log.info(f"Engine built in {time.perf_counter() - t0:.6g} sec ({len(built.layers)} layers, "
             f"{progress.count} tactics chosen).")
    data = to_bytes(built)
    log.info(f"Created engine with size: {len(data) / 2**20:.6g} MiB")
    if opts.save_engine:
        io_files.write_bytes(opts.save_engine, data, "engine file")
        log.info(f"Engine saved to {opts.save_engine}")
    return from_bytes(data, "the engine just built")   # run exactly what was (or would be) saved, as trtexec does


def _load(opts, log):
    t0 = time.perf_counter()
    data = read_bytes(opts.load_engine, "engine file")
    log.info(f"Loaded engine with size: {len(data) / 2**20:.6g} MiB")
    engine = from_bytes(data, f"engine file {opts.load_engine}")
    log.info(f"Engine deserialized in {time.perf_counter() - t0:.6g} sec.")
    if opts.save_engine and os.path.abspath(opts.save_engine) != os.path.abspath(opts.load_engine):
        io_files.write_bytes(opts.save_engine, data, "engine file")
        log.info(f"Engine saved to {opts.save_engine}")
    return engine


def _inference_shapes(engine, opts) -> dict:
    """Per input: --shapes, else the .npy file's shape (None here), else the static shape, else profile 0's opt."""
    names = engine.input_names
    for flag, given in (("--shapes", opts.shapes), ("--loadInputs", opts.load_inputs)):
        for name in given:
            if name not in names:
                raise ShapeError(f"{flag} names {name!r}, which is not an input of the engine",
                                 f"the engine's inputs are: {', '.join(names)}")
    shapes = {}
    for info in engine.inputs:
        if info.name in opts.shapes:
            shapes[info.name] = opts.shapes[info.name]
        elif str(opts.load_inputs.get(info.name, "")).endswith(".npy"):
            shapes[info.name] = None
        elif info.is_static:
            shapes[info.name] = tuple(info.shape)
        elif engine.profiles and info.name in engine.profiles[0]:
            shapes[info.name] = tuple(engine.profiles[0][info.name][1])
        else:
            raise ShapeError(f"input {info.name!r} has no inference shape", f"give one with --shapes={info.name}:1x3x224x224")
    check_in_profiles(shapes, engine)
    if opts.use_profile is not None:
        _check_use_profile(engine, shapes, opts.use_profile)
    return shapes


def _check_use_profile(engine, shapes: dict, index: int) -> None:
    """--useProfile=N: every inference shape inside profile N (the runtime then runs it under profile N or an
    earlier one that also fits; kernels do not depend on the profile, only the shape bounds do)."""
    if not 0 <= index < max(len(engine.profiles), 1):
        raise UsageError(f"--useProfile={index}: the engine has {len(engine.profiles)} optimization profile(s)",
                         f"give --useProfile=0..{max(len(engine.profiles), 1) - 1}")
    for name, (mn, _, mx) in (engine.profiles[index].items() if engine.profiles else ()):
        s = shapes.get(name)
        if s is not None and (len(s) != len(mn) or any(not a <= d <= b for a, d, b in zip(mn, s, mx))):
            raise ShapeError(f"--useProfile={index}: input {name!r} shape {format_shape(s)} is outside profile "
                             f"{index} ({format_shape(mn)} .. {format_shape(mx)})",
                             "give --shapes inside that profile, or another --useProfile")


def _inference(engine, opts, device, log) -> None:
    shapes = _inference_shapes(engine, opts)
    gen = torch.Generator().manual_seed(0)
    feed = {}
    for info in engine.inputs:
        path = opts.load_inputs.get(info.name)
        if path:
            feed[info.name] = io_files.read_input(info.name, path, info.dtype, shapes[info.name])
            log.info(f"Using values loaded from {path} for input {info.name}")
        else:
            feed[info.name] = io_files.random_input(info.dtype, shapes[info.name], gen)
            log.info(f"Using random values for input {info.name}")
        log.info(f"Input shape of {info.name}: {format_shape(feed[info.name].shape)}")
    context = ExecutionContext(engine, device, use_cuda_graph=opts.use_cuda_graph, threads=opts.threads)
    if opts.threads is not None:
        log.info(f"CPU threads: {opts.threads} (--threads; torch's setting outside the calls: {torch.get_num_threads()})")
    describe_context(context, log)
    context.check_inputs(feed)
    log.info("Starting inference")
    runner = make_runner(context, feed, device, opts.data_transfers, opts.spin_wait)
    if opts.spin_wait and device.type != "cuda":
        log.warn("--useSpinWait has no effect on CPU: there are no device events to wait for")
    result = benchmark(runner, opts.warmup_ms, opts.duration_s, opts.iterations, opts.idle_ms)
    if result.interrupted:
        log.warn("Interrupted: reporting the queries run so far")
    log.info(f"Warmup completed {len(result.warmup)} queries over {result.warmup_ms:.6g} ms")
    log.info(f"Timing trace has {len(result.timed)} queries over {result.walltime_ms / 1e3:.6g} s")
    log.info()
    for line in perf_report.average_lines(result.timed, opts.avg_runs):
        log.info(line)
    log.info()
    info, warnings = perf_report.summary_lines(result, opts.percentiles, device.type == "cpu")
    for line in info:
        log.info(line)
    for line in warnings:
        log.warn(line)
    if device.type == "cpu":
        log.info("Note: on CPU, CPU Compute Time is the device compute time (host clock); H2D and D2H Latency "
                 "are 0 because the device is the host.")
    for line in perf_report.histogram_lines([t.compute for t in result.timed],
                                            label=perf_report.compute_label(device.type == "cpu")):
        log.info(line)
    log.info("Explanations of the performance metrics are printed in the verbose logs.")
    for line in perf_report.EXPLANATIONS:
        log.verbose(line)
    log.info()
    outputs = runner.host_outputs()
    if opts.dump_output:
        for line in io_files.dump_lines(outputs):
            log.info(line)
    if opts.export_output:
        io_files.write_json_records(opts.export_output, io_files.output_records(outputs), "output file")
        log.info(f"Outputs written to {opts.export_output}")
    if opts.export_times:
        io_files.write_json_records(opts.export_times, perf_report.times_records(result), "times file")
        log.info(f"Per-query times written to {opts.export_times}")
    after_benchmark(engine, context, feed, opts, device, log)
