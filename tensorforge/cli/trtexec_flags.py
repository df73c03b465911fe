"""The trtexec flag table, as data: one row per flag → the ExecOptions field it sets, or why it is refused.

Entry points: `FLAGS` (name → Flag), `ExecOptions` (parsed values, trtexec's defaults), `parse_argv(argv)`.
Syntax is trtexec's: `--flag=value`, and switches take no value. A recognised flag that is not supported
yet is refused with its row's reason; an unknown flag is refused too; nothing is silently ignored.
To support a flag: give its row a `field` (and a `convert` name from CONVERTERS) instead of `refused`,
add the field to ExecOptions, and use it in exec_cmd.py (or wherever the feature lives).
"""

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from ..util.errors import UsageError
from .shapes_arg import parse_named_values, parse_shapes


@dataclass(frozen=True)
class Flag:
    name: str
    section: str                 # Model | Build | Inference | Reporting | System | Help
    help: str
    field: str | None = None     # ExecOptions attribute this flag sets
    value: str | None = None     # metavar when the flag takes a value ("<file>", "N", "spec"); None = switch
    convert: str = "str"         # CONVERTERS key that turns the text into the field's value
    const: Any = True            # what a switch stores in its field
    refused: str | None = None   # "not supported yet" reason; the flag is recognised but refused
    repeat: bool = False         # may be given several times; each value is appended to a list field


@dataclass
class ExecOptions:
    """Everything `tensorforge exec` was asked to do; defaults are trtexec's."""
    onnx: str | None = None
    load_engine: str | None = None
    save_engine: str | None = None
    min_shapes: dict = field(default_factory=dict)
    opt_shapes: dict = field(default_factory=dict)
    max_shapes: dict = field(default_factory=dict)
    fp16: bool = False
    bf16: bool = False
    tf32: bool = True
    int8: bool = False                           # precision fields: docs/precision.md
    fp8: bool = False
    best: bool = False
    strongly_typed: bool = False
    precision_constraints: str = "none"
    layer_precisions: list = field(default_factory=list)
    layer_output_types: list = field(default_factory=list)
    sparsity: str = "disable"
    calib: str | None = None
    calib_data: list = field(default_factory=list)
    calib_algo: str = "entropy2"
    min_shapes_calib: dict = field(default_factory=dict)
    opt_shapes_calib: dict = field(default_factory=dict)
    max_shapes_calib: dict = field(default_factory=dict)
    optimization_level: int = 3
    skip_inference: bool = False
    shapes: dict = field(default_factory=dict)
    load_inputs: dict = field(default_factory=dict)
    iterations: int = 10
    warmup_ms: float = 200.0
    duration_s: float = 3.0
    idle_ms: float = 0.0
    data_transfers: bool = True
    spin_wait: bool = False
    verbose: bool = False
    avg_runs: int = 10
    percentiles: list = field(default_factory=lambda: [90.0, 95.0, 99.0])
    dump_output: bool = False
    export_times: str | None = None
    export_output: str | None = None
    device: str | None = None
    plugins: list = field(default_factory=list)  # --staticPlugins/--dynamicPlugins/--plugins, in order
    timing_cache_file: str | None = None
    use_timing_cache: bool = True
    workspace_bytes: int | None = None
    use_cuda_graph: bool | None = None           # None: on where the device supports it (CUDA)
    more_profiles: list = field(default_factory=list)  # --profile=1.. : [{"min": {}, "opt": {}, "max": {}}, ...]
    use_profile: int | None = None               # --useProfile=N: inference shapes must fit profile N
    threads: int | None = None                   # --threads=N: torch's intra-op CPU threads (util/cpu_threads.py)
    profiling_verbosity: str = "layer_names_only"
    compat: dict = field(default_factory=dict)   # flags accepted as documented no-ops: name → value (True: switch)
    time_deserialize: bool = False
    error_on_cache_miss: bool = False
    inf_streams: int = 1
    dump_profile: bool = False
    export_profile: str | None = None
    separate_profile_run: bool = False
    dump_layer_info: bool = False
    dump_optimization_profile: bool = False
    input_formats: list = field(default_factory=list)
    output_formats: list = field(default_factory=list)
    export_layer_info: str | None = None
    help: bool = False
    given: list = field(default_factory=list)    # flag names in command-line order


# ---- converters: text → value, one-line UsageError on bad text --------------------------------------------
def _number(kind: type, lo: float | None = None, allow: tuple = ()) -> Callable[[str, str], Any]:
    def conv(text: str, flag: str):
        try:
            v = kind(text)
        except ValueError:
            raise UsageError(f"{flag} takes a{'n integer' if kind is int else ' number'}, got {text!r}",
                             f"write {flag}=N") from None
        if isinstance(v, float) and not math.isfinite(v):     # nan compares false with every bound
            raise UsageError(f"{flag} takes a finite number, got {text!r}", f"write {flag}=N")
        if lo is not None and v < lo and v not in allow:
            raise UsageError(f"{flag} must be at least {lo:g}, got {text}", f"write {flag}=N with N >= {lo:g}")
        return v
    return conv


def _percentiles(text: str, flag: str) -> list[float]:
    out = []
    for part in text.split(","):
        try:
            p = float(part)
        except ValueError:
            raise UsageError(f"{flag} takes comma-separated numbers, got {part!r}", f"write {flag}=90,95,99") from None
        if not 0.0 <= p <= 100.0:
            raise UsageError(f"{flag}: percentile {part} is outside [0, 100]", f"write {flag}=90,95,99")
        out.append(p)
    return out


def _level(text: str, flag: str) -> int:
    v = _number(int)(text, flag)
    if not 0 <= v <= 5:
        raise UsageError(f"{flag} must be between 0 and 5, got {v}", f"write {flag}=3 (the default)")
    return v


def _nonempty(text: str, flag: str) -> str:
    if not text:
        raise UsageError(f"{flag} needs a value", f"write {flag}=<value>")
    return text


_UNITS = {"B": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def _pools(text: str, flag: str) -> int:
    """trtexec's --memPoolSize=workspace:N[B|K|M|G] (MiB when no unit) → the workspace limit in bytes."""
    limit = None
    for part in text.split(","):
        pool, sep, size = part.partition(":")
        if not sep or not size:
            raise UsageError(f"{flag} takes pool:size, got {part!r}", f"write {flag}=workspace:1024M")
        if pool != "workspace":
            raise UsageError(f"{flag}: pool {pool!r} is not supported (only workspace: there is no DLA, and tactics "
                             "do not use a separate shared-memory pool)", f"write {flag}=workspace:N")
        unit = size[-1].upper() if size[-1].upper() in _UNITS else "M"
        number = size[:-1] if size[-1].upper() in _UNITS else size
        try:
            value = float(number)
        except ValueError:
            raise UsageError(f"{flag}: size {size!r} is not a number with an optional B/K/M/G unit",
                             f"write {flag}=workspace:1024M") from None
        if value < 0:
            raise UsageError(f"{flag}: size {size!r} is negative", f"write {flag}=workspace:1024M")
        limit = int(value * _UNITS[unit])
    return limit


CONVERTERS: dict[str, Callable[[str, str], Any]] = {
    "str": _nonempty, "int": _number(int), "count": _number(int, 1), "ms": _number(float, 0),
    "seconds": _number(float, 0, allow=(-1.0,)), "percentiles": _percentiles, "level": _level,
    "shapes": lambda t, f: parse_shapes(t, f), "files": lambda t, f: parse_named_values(t, f),
    "pools": _pools,
}


def _choice(*options: str) -> Callable[[str, str], str]:
    def conv(text: str, flag: str) -> str:
        if text not in options:
            raise UsageError(f"{flag} takes one of {', '.join(options)}, got {text!r}", f"write {flag}={options[0]}")
        return text
    return conv


def _precisions(text: str, flag: str):
    from ..builder.precision_spec import parse_precisions
    return parse_precisions(text, flag)


def _output_types(text: str, flag: str):
    from ..builder.precision_spec import parse_output_types
    return parse_output_types(text, flag)


def _paths(text: str, flag: str) -> list[str]:
    parts = [p for p in text.split(",") if p]
    if not parts:
        raise UsageError(f"{flag} needs a folder or files", f"write {flag}=calib/ or {flag}=a.npz,b.npz")
    return parts


def _workspace(text: str, flag: str) -> int:
    """trtexec 8.x's --workspace=N (MiB) → bytes, as --memPoolSize=workspace:N."""
    return int(_number(float, 0)(text, flag) * 2**20)


def _profile_index(text: str, flag: str) -> int:
    return _number(int, 0)(text, flag)


_IO_TYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "int8": "int8", "int32": "int32",
             "int64": "int64", "bool": "bool", "uint8": "uint8", "fp8": "float8_e4m3fn"}


def _io_formats(text: str, flag: str) -> list[tuple[str, str]]:
    """`fp16:chw,fp32:chw` → [("float16", "chw"), ("float32", "chw")]: one type:format per I/O tensor, in order."""
    out = []
    for part in text.split(","):
        kind, _, fmt = part.partition(":")
        if kind not in _IO_TYPES:
            raise UsageError(f"{flag}: unknown type {kind!r} in {part!r}", f"write {flag}=fp32:chw (types: "
                             f"{', '.join(_IO_TYPES)})")
        for f in (fmt or "chw").split("+"):
            if f not in ("chw", "linear"):
                raise UsageError(f"{flag}: format {f!r} is not supported: I/O tensors are linear (chw) here; "
                                 "vectorised layouts (hwc8, chw32, ...) are not implemented", f"write {flag}={kind}:chw")
        out.append((_IO_TYPES[kind], fmt or "chw"))
    return out


CONVERTERS.update({"io_formats": _io_formats, "hw_compat": _choice("none", "ampere+", "sameComputeCapability")})
CONVERTERS.update({"workspace": _workspace, "profile": _profile_index,
                   "verbosity": _choice("layer_names_only", "detailed", "none"), "nonneg": _number(int, 0)})
CONVERTERS.update({"precisions": _precisions, "output_types": _output_types, "paths": _paths,
                   "constraints": _choice("none", "prefer", "obey"), "sparsity": _choice("disable", "enable", "force"),
                   "calib_algo": _choice("entropy2", "entropy", "minmax", "percentile", "legacy")})


# ---- the table ------------------------------------------------------------------------------------------
def use(name, section, fld, help, value=None, convert="str", const=True, repeat=False) -> Flag:  # noqa: A002
    return Flag(name, section, help, fld, value, convert, const, repeat=repeat)


def noop(name, section, why, value=None, convert="str") -> Flag:
    """A flag accepted because it changes nothing here, honestly: `why` is printed when it is given."""
    return Flag(name, section, "no-op: " + why, "compat", value, convert)


def refuse(name, section, why, value=None) -> Flag:
    return Flag(name, section, why, value=value, refused=why)


_LOWP = "INT4 weight-only quantization is not implemented"
_INFO = "layer information always has every detail: use --dumpLayerInfo, or `tensorforge inspect model.engine`"
_STREAM = "streams inside one engine are not implemented; --infStreams=N runs N contexts on N streams"
_TIMING = ("the timing method is fixed: per candidate, on CUDA 3 warm-up runs then the median of 10 CUDA-graph "
           "replays; on the CPU 1 warm-up run then the median of 5 (host clock)")
_PLUG = ("engines never contain plugin code and ONNX models name no plugin libraries; load plugins with "
         "--staticPlugins=FILE.py when building and when running")
_DLA = "there is no DLA: tensorforge runs on CUDA GPUs and CPUs"
_SAFE = "safety-certified engines do not exist in tensorforge"
_LEGACY = "trtexec removed it (implicit batch, UFF and Caffe are gone); ONNX models use explicit shapes"
_PLAN = "engine files hold one portable format; refit, lean runtimes and weight stripping are not implemented"
_THREADS_SWITCH = ("one host thread enqueues every --infStreams context without waiting, so the CUDA streams already "
                   "run concurrently; on the CPU the contexts run one after another")
SWITCH_FORMS = {"--threads": _THREADS_SWITCH}    # valued flags whose bare form is another trtexec switch: why no-op

_ROWS = [
    # Model
    use("--onnx", "Model", "onnx", "ONNX model to build", "<file>"),
    *(refuse(n, "Model", _LEGACY, "<v>") for n in ("--uff", "--model", "--deploy", "--output", "--uffInput")),
    refuse("--uffNHWC", "Model", _LEGACY),
    # Build
    use("--minShapes", "Build", "min_shapes", "build a profile with these minimum shapes", "spec", "shapes"),
    use("--optShapes", "Build", "opt_shapes", "build a profile with these optimum shapes", "spec", "shapes"),
    use("--maxShapes", "Build", "max_shapes", "build a profile with these maximum shapes", "spec", "shapes"),
    use("--fp16", "Build", "fp16", "compute float layers in float16 (inputs/outputs stay as declared)"),
    use("--bf16", "Build", "bf16", "compute float layers in bfloat16 (inputs/outputs stay as declared)"),
    use("--noTF32", "Build", "tf32", "disable TF32 for float32 matmul/conv on CUDA (build and run)", const=False),
    use("--builderOptimizationLevel", "Build", "optimization_level",
        "0 = no graph optimisation or tactic timing ... 5 = all (default 3; from 3, CUDA builds also time close "
        "tactic choices inside the whole network)", "N", "level"),
    use("--saveEngine", "Build", "save_engine", "write the engine file (atomically)", "<file>"),
    use("--loadEngine", "Build", "load_engine", "load an engine file instead of building", "<file>"),
    use("--skipInference", "Build", "skip_inference", "build (and save) the engine, then exit"),
    use("--buildOnly", "Build", "skip_inference", "alias of --skipInference"),
    use("--int8", "Build", "int8", "INT8 Conv/Gemm/MatMul from calibrated ranges (--calib/--calibData; without "
        "them placeholder ranges, for speed only)"),
    use("--fp8", "Build", "fp8", "FP8 E4M3 Conv/Gemm/MatMul from calibrated ranges (amax/448)"),
    use("--best", "Build", "best", "every precision allowed: FP16, and INT8 per layer where it times faster (two "
        "trial builds)"),
    use("--calib", "Build", "calib", "calibration cache (TensorRT's text format): read when it exists, else "
        "written after calibrating from --calibData", "<file>"),
    use("--calibData", "Build", "calib_data", "calibrate from these inputs: a folder of .npz (one array per input) "
        "/ .npy (the only input) files, or files separated by commas (tensorforge's own flag)", "<dir|files>",
        "paths"),
    use("--calibAlgo", "Build", "calib_algo", "entropy2 (default, EntropyCalibration2) | entropy | minmax | "
        "percentile | legacy (tensorforge's own flag)", "algo", "calib_algo"),
    use("--minShapesCalib", "Build", "min_shapes_calib", "calibration profile: minimum shapes", "spec", "shapes"),
    use("--optShapesCalib", "Build", "opt_shapes_calib", "calibration profile: opt shapes", "spec", "shapes"),
    use("--maxShapesCalib", "Build", "max_shapes_calib", "calibration profile: maximum shapes", "spec", "shapes"),
    refuse("--int4", "Build", _LOWP),
    use("--stronglyTyped", "Build", "strongly_typed", "types exactly as the model says: no casts inserted, Cast "
        "nodes honoured (no --fp16/--bf16/--int8/--fp8/--best)"),
    use("--precisionConstraints", "Build", "precision_constraints", "none | prefer (unmet layer constraints are "
        "logged) | obey (an unmet constraint fails the build, naming the layer)", "spec", "constraints"),
    use("--layerPrecisions", "Build", "layer_precisions", "compute precision per layer: *:fp16,name:fp32 (later "
        "entries win; ONNX node or --dumpLayerInfo layer names; fp32|fp16|bf16|int8|fp8)", "spec", "precisions"),
    use("--layerOutputTypes", "Build", "layer_output_types", "output types per layer: *:fp16,name:fp32+fp16 ('+' "
        "for several outputs)", "spec", "output_types"),
    refuse("--layerDeviceTypes", "Build", _DLA, "spec"),
    use("--memPoolSize", "Build", "workspace_bytes", "workspace:N[B|K|M|G] (MiB by default): scratch memory a "
        "tactic may use beyond its inputs and outputs; hungrier tactics are rejected while timing", "spec", "pools"),
    use("--workspace", "Build", "workspace_bytes", "deprecated (trtexec 8.x): read as --memPoolSize=workspace:N "
        "(N MiB), with a deprecation line", "N", "workspace"),
    use("--timingCacheFile", "Build", "timing_cache_file", "read and update this timing cache, CPU builds too (they time only with one); "
        "merged into the file under a lock on <file>.lock",
        "<file>"),
    use("--noBuilderCache", "Build", "use_timing_cache", "no timing cache: time every layer, even identical ones",
        const=False),
    use("--errorOnTimingCacheMiss", "Build", "error_on_cache_miss", "fail the build when a layer with several "
        "candidate tactics is not in --timingCacheFile (instead of timing it)"),
    noop("--noCompilationCache", "Build", "compiled kernels are cached by their source hash only and engines hold "
         "no compiled code"),
    use("--sparsity", "Build", "sparsity", "disable (default) | enable (2:4 sparse GEMM tactics for weights with "
        "the pattern, CUDA) | force (prune weights to 2:4 first: speed runs only, accuracy is not kept)", "spec",
        "sparsity"),
    use("--profilingVerbosity", "Build", "profiling_verbosity", "layer_names_only | detailed | none: no-op, "
        "engines always record every layer's op, tactic, precision and ONNX origin (" + _INFO + ")", "mode",
        "verbosity"),
    noop("--tacticSources", "Build", "cuBLAS/cuDNN/... masks name TensorRT's libraries; tensorforge's tactics are "
         "torch, Triton and oneDNN, and every candidate is timed", "tactics"),
    use("--inputIOFormats", "Build", "input_formats", "type:chw|linear per input, in order: accepted where it is the "
        "input's own dtype (I/O stays in the model's dtypes, linear layout); any other format is refused, naming it",
        "spec", "io_formats"),
    use("--outputIOFormats", "Build", "output_formats", "as --inputIOFormats, for the outputs", "spec", "io_formats"),
    use("--profile", "Build", "more_profiles", "start optimization profile N (0, 1, ... in order): the "
        "--minShapes/--optShapes/--maxShapes after it belong to it; the runtime picks the first profile that fits "
        "the shapes", "N", "profile"),
    noop("--maxAuxStreams", "Build", "layers of one engine run in order on one stream (" + _STREAM + ")", "N",
         "nonneg"),
    refuse("--maxTactics", "Build", _TIMING, "N"),
    noop("--hardwareCompatibilityLevel", "Build", "engine files hold one portable format: a layer whose tactic "
         "cannot run on the loading device runs its torch reference there", "mode", "hw_compat"),
    refuse("--runtimePlatform", "Build", _PLAN, "platform"),
    *(noop(n, "Build", "engine files are data; any tensorforge of the same format version loads them, and there "
           "is no separate lean runtime") for n in ("--versionCompatible", "--vc", "--excludeLeanRuntime")),
    *(refuse(n, "Build", _PLAN) for n in ("--refit", "--stripWeights", "--stripAllWeights", "--weightless",
                                          "--useRuntime", "--allowWeightStreaming", "--getPlanVersionOnly")),
    refuse("--leanDLLPath", "Build", _PLAN, "<file>"),
    *(refuse(n, "Build", _SAFE) for n in ("--safe", "--consistency", "--restricted")),
    noop("--allowGPUFallback", "Build", "there is no DLA to fall back from: every layer runs on the device"),
    refuse("--buildDLAStandalone", "Build", _DLA),
    noop("--directIO", "Build", "inputs and outputs are always used in their own format, with no reformat layers"),
    noop("--preview", "Build", "there are no preview features; every feature is on", "features"),
    noop("--tempdir", "Build", "builds write no temporary files (only the atomic --saveEngine/--timingCacheFile "
         "temporaries beside their targets)", "<dir>"),
    noop("--tempfileControls", "Build", "builds write no temporary files", "controls"),
    refuse("--explicitBatch", "Build", _LEGACY), refuse("--maxBatch", "Build", _LEGACY, "N"),
    noop("--minTiming", "Build", "trtexec 8.x's flag, accepted: " + _TIMING, "N", "count"),
    noop("--avgTiming", "Build", "trtexec 8.x's flag, accepted: " + _TIMING, "N", "count"),
    refuse("--allocationStrategy", "Build", "activation memory is planned once at build time for the max shapes; "
           "static/profile/runtime strategies are not implemented", "mode"),
    refuse("--markUnfusedTensorsAsDebugTensors", "Build", "debug tensors are not implemented"),
    refuse("--markDebug", "Build", "debug tensors are not implemented", "spec"),
    # Inference
    use("--shapes", "Inference", "shapes", "input shapes for inference (dynamic engines default to the opt shapes)",
        "spec", "shapes"),
    use("--loadInputs", "Inference", "load_inputs", "input values from raw little-endian files or .npy "
        "(default: random)", "spec", "files"),
    use("--iterations", "Inference", "iterations", "run at least N timed iterations (default 10)", "N", "count"),
    use("--warmUp", "Inference", "warmup_ms", "warm up for N ms before timing (default 200)", "N", "ms"),
    use("--duration", "Inference", "duration_s", "time for at least N seconds (default 3; -1 = until Ctrl-C)",
        "N", "seconds"),
    use("--idleTime", "Inference", "idle_ms", "sleep N ms between two iterations (default 0)", "N", "ms"),
    use("--noDataTransfers", "Inference", "data_transfers", "do not copy inputs/outputs between host and device",
        const=False),
    use("--includeDataTransfers", "Inference", "data_transfers", "copy inputs/outputs each iteration (default)",
        const=True),
    use("--useSpinWait", "Inference", "spin_wait", "busy-wait on CUDA events instead of blocking"),
    use("--useCudaGraph", "Inference", "use_cuda_graph", "require CUDA-graph replay (an engine that cannot be "
        "captured is an error); the default captures where possible; on the CPU it does not apply (said, run goes "
        "on)"),
    use("--noCudaGraph", "Inference", "use_cuda_graph", "run every layer eagerly, no CUDA graph", const=False),
    use("--infStreams", "Inference", "inf_streams", "also measure throughput with N execution contexts on N "
        "streams", "N", "count"),
    use("--streams", "Inference", "inf_streams", "alias of --infStreams", "N", "count"),
    use("--useProfile", "Inference", "use_profile", "run with optimization profile N: the inference shapes must "
        "fit it (default: the first profile that fits)", "N", "nonneg"),
    refuse("--asyncFileReader", "Inference", "engines are read whole from a file; streaming readers are not "
           "implemented", "<file>"),
    use("--separateProfileRun", "Inference", "separate_profile_run", "profile layers in a run apart from the "
        "timed one (always the case here: graphs are not profiled per layer)"),
    refuse("--sleepTime", "Inference", "a delay between launch and compute is not implemented", "N"),
    use("--threads", "Inference", "threads", "torch's intra-op CPU threads while building and running (onnxruntime's "
        "intra_op_num_threads; default: torch's setting). Written bare, it is trtexec's switch (host threads "
        "driving the streams), a no-op here: " + _THREADS_SWITCH, "N", "count"),
    use("--timeDeserialize", "Inference", "time_deserialize", "time reading the engine (--loadEngine, or the engine "
        "just built): median of 5 deserializations, printed before inference"),
    refuse("--timeRefit", "Inference", _PLAN),
    noop("--exposeDMA", "Inference", "transfers are already serialised with compute in one stream"),
    refuse("--useManagedMemory", "Inference", "managed memory is not implemented"),
    refuse("--persistentCacheRatio", "Inference", "L2 persistence control is not implemented", "ratio"),
    refuse("--weightStreamingBudget", "Inference", _PLAN, "N"),
    refuse("--batch", "Inference", _LEGACY, "N"),
    refuse("--saveDebugTensors", "Inference", "debug tensors are not implemented", "spec"),
    # Reporting
    use("--verbose", "Reporting", "verbose", "verbose log (and tracebacks on errors)"),
    use("--avgRuns", "Reporting", "avg_runs", "print averages over N consecutive iterations (default 10)",
        "N", "count"),
    use("--percentile", "Reporting", "percentiles", "report these percentiles (default 90,95,99)", "P1,P2",
        "percentiles"),
    use("--dumpOutput", "Reporting", "dump_output", "print the outputs of the last iteration"),
    use("--exportTimes", "Reporting", "export_times", "write per-iteration times as JSON", "<file>"),
    use("--exportOutput", "Reporting", "export_output", "write the outputs of the last iteration as JSON", "<file>"),
    use("--dumpProfile", "Reporting", "dump_profile", "print the per-layer profile"),
    use("--exportProfile", "Reporting", "export_profile", "write the per-layer profile as JSON (trtexec's shape)",
        "<file>"),
    use("--dumpLayerInfo", "Reporting", "dump_layer_info", "print every layer: op, tactic, precision, ONNX origin"),
    use("--exportLayerInfo", "Reporting", "export_layer_info", "write the layer information as JSON", "<file>"),
    refuse("--dumpRefit", "Reporting", _PLAN),
    use("--dumpOptimizationProfile", "Reporting", "dump_optimization_profile", "print every optimization profile "
        "(min/opt/max per input) of the engine"),
    refuse("--dumpRawBindingsToFile", "Reporting", "use --exportOutput (JSON)"),
    # System
    use("--device", "System", "device", "N = cuda:N; also cpu or cuda (default: cuda when present, else cpu)", "N"),
    refuse("--useDLACore", "System", _DLA, "N"),
    *(use(n, "System", "plugins", "load plugins from a Python file or module (repeatable; tensorforge plugins are "
          "Python, not shared libraries)", "<file>", repeat=True)
      for n in ("--staticPlugins", "--dynamicPlugins", "--plugins")),
    refuse("--setPluginsToSerialize", "System", _PLUG, "<file>"),
    noop("--ignoreParsedPluginLibs", "System", "ONNX models name no plugin libraries here, so there is nothing "
         "to ignore; plugins come from --staticPlugins"),
    # Help
    use("--help", "Help", "help", "print this message"),
    use("-h", "Help", "help", "print this message"),
]

FLAGS: dict[str, Flag] = {}
for _row in _ROWS:
    if _row.name in FLAGS:
        raise ValueError(f"flag {_row.name} is listed twice")
    FLAGS[_row.name] = _row


def parse_argv(argv: list[str]) -> ExecOptions:
    """trtexec's command line → ExecOptions. Every problem is a one-line UsageError (exit code 2)."""
    opts = ExecOptions()
    setter: dict[str, str] = {}                  # field → the flag that set it
    profile = None                               # the --profile=N the shape flags belong to now
    for arg in argv:
        name, eq, text = arg.partition("=")
        row = FLAGS.get(name)
        if name == "--profile" or (profile and name in _PROFILE_SHAPES):
            profile = _profile_arg(opts, name, eq, text, profile)
            continue
        if name in SWITCH_FORMS and not eq:        # trtexec's bare switch of the same name (see SWITCH_FORMS)
            if name in opts.compat:
                raise UsageError(f"{name} is given twice", "give each flag once")
            opts.compat[name] = True
            continue
        if row is None:
            if not arg.startswith("-"):
                raise UsageError(f"unexpected argument {arg!r}: trtexec flags are written --flag=value",
                                 "e.g. --onnx=model.onnx (see tensorforge exec --help)")
            raise UsageError(f"unknown option {name}", "see tensorforge exec --help for the supported flags")
        if row.refused:
            raise UsageError(f"{name} is not supported yet: {row.refused}", "remove it from the command line")
        if row.field == "compat":
            if name in opts.compat:
                raise UsageError(f"{name} is given twice", "give each flag once")
            if (row.value is None) == bool(eq):
                raise UsageError(f"{name} {'is a switch and takes no value' if eq else 'needs a value'}",
                                 f"write {name}" + (f"={row.value}" if row.value else ""))
            opts.compat[name] = CONVERTERS[row.convert](text, name) if row.value else True
            opts.given.append(name)
            continue
        if row.repeat:
            if not eq or not text:
                raise UsageError(f"{name} needs a value", f"write {name}={row.value}")
            getattr(opts, row.field).append(CONVERTERS[row.convert](text, name))
            opts.given.append(name)
            continue
        if name in opts.given:
            raise UsageError(f"{name} is given twice", "give each flag once")
        if row.field in setter:
            raise UsageError(f"{name} and {setter[row.field]} set the same option", "give only one of them")
        setter[row.field] = name
        opts.given.append(name)
        if row.value is None:
            if eq:
                raise UsageError(f"{name} is a switch and takes no value (got {arg!r})", f"write just {name}")
            setattr(opts, row.field, row.const)
        else:
            if not eq:
                raise UsageError(f"{name} needs a value", f"write {name}={row.value} (trtexec syntax, no space)")
            setattr(opts, row.field, CONVERTERS[row.convert](text, name))
    return opts


_PROFILE_SHAPES = {"--minShapes": "min", "--optShapes": "opt", "--maxShapes": "max"}


def _profile_arg(opts: ExecOptions, name: str, eq: str, text: str, profile: int | None) -> int:
    """`--profile=N` starts profile N (0, 1, 2, ... in order); a shape flag after `--profile=N` (N ≥ 1) fills profile
    N. Profile 0's shapes stay in min_shapes/opt_shapes/max_shapes, so a command without --profile is unchanged."""
    if name == "--profile":
        if not eq or not text:
            raise UsageError("--profile needs a value", "write --profile=0 --minShapes=... --profile=1 --minShapes=...")
        n = _profile_index(text, name)
        expected = 0 if profile is None else profile + 1
        if n != expected:
            raise UsageError(f"--profile={n} out of order: the next profile is {expected}",
                             "number the profiles 0, 1, 2, ... in command-line order")
        if n > 0:
            opts.more_profiles.append({"min": {}, "opt": {}, "max": {}})
        opts.given.append(name)
        return n
    if not eq:
        raise UsageError(f"{name} needs a value", f"write {name}=spec (trtexec syntax, no space)")
    shapes = opts.more_profiles[profile - 1][_PROFILE_SHAPES[name]]
    if shapes:
        raise UsageError(f"{name} is given twice for profile {profile}", "give each shape flag once per --profile")
    shapes.update(parse_shapes(text, name))
    opts.given.append(name)
    return profile


def help_text() -> str:
    """The --help page, generated from the table: supported flags per section, then the refused ones."""
    lines = ["usage: tensorforge exec [--flag=value ...]   (trtexec's flags and syntax)", ""]
    for section in ("Model", "Build", "Inference", "Reporting", "System", "Help"):
        lines.append(f"=== {section} Options ===")
        for row in _ROWS:
            if row.section == section and not row.refused:
                spelled = f"{row.name}={row.value}" if row.value else row.name
                lines.append(f"  {spelled:<32} {row.help}")
        lines.append("")
    lines.append("=== Recognised and refused (the reason is why tensorforge does not do it) ===")
    for row in _ROWS:
        if row.refused:
            lines.append(f"  {row.name:<32} {row.refused}")
    return "\n".join(lines)
