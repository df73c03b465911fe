"""Builder, IBuilderConfig, IOptimizationProfile, ITimingCache, IHostMemory: TensorRT's build side.

    builder = trt.Builder(logger)
    network = builder.create_network(0)
    config = builder.create_builder_config()
    config.set_flag(trt.BuilderFlag.FP16); config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 1 << 30)
    profile = builder.create_optimization_profile(); profile.set_shape("x", mn, opt, mx)
    config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)      # IHostMemory: bytes of the engine file

Thin wrappers over builder.BuilderConfig / build_engine / engine.to_bytes. Flags with no tensorforge meaning
yet (INT4, REFIT, ...) are refused when set, with the reason, never ignored. INT8/FP8 take their ranges from
`config.int8_calibrator` (calibrator.py), ITensor.set_dynamic_range, or placeholders (speed runs, a warning).
Unlike TensorRT, a failed build raises a TensorforgeError saying why instead of returning None.
"""

from dataclasses import replace

from ...builder import BuilderConfig, OptimizationProfile, build_engine
from ...builder.timing_cache import TimingCache
from ...engine import to_bytes
from ...util.device import resolve_device
from ...util.errors import UsageError
from ...util.log import Logger, get_logger
from .calibrator import as_source
from .enums import BuilderFlag, MemoryPoolType, NetworkDefinitionCreationFlag, ProfilingVerbosity
from .network import NetworkDefinition
from .progress import TOP, BuildCancelled, IProgressMonitor, MonitorBridge
from .strict import TrtObject
from .tensors import Dims

_REFUSED = {
    BuilderFlag.INT4: "INT4 weight-only quantization is not implemented",
    BuilderFlag.REFIT: "engines cannot be refitted yet (rebuild instead)",
    BuilderFlag.REFIT_IDENTICAL: "engines cannot be refitted yet (rebuild instead)",
    BuilderFlag.SAFETY_SCOPE: "there is no safety runtime",
    BuilderFlag.WEIGHT_STREAMING: "weight streaming is not implemented",
    BuilderFlag.STRIP_PLAN: "weight-stripped plans are not implemented",
}
# flags that are accepted but change nothing here, with the reason (logged when set)
_NO_EFFECT = {
    BuilderFlag.DEBUG: "layers always run one by one in order; every tensor can be marked as an output instead",
    BuilderFlag.GPU_FALLBACK: "there is no DLA to fall back from",
    BuilderFlag.DIRECT_IO: "inputs and outputs are always used in their own format",
    BuilderFlag.REJECT_EMPTY_ALGORITHMS: "every op has a tactic (the torch reference), so none is ever empty",
    BuilderFlag.VERSION_COMPATIBLE: "engine files are data; any tensorforge of the same format version loads them",
    BuilderFlag.EXCLUDE_LEAN_RUNTIME: "there is no separate lean runtime",
    BuilderFlag.DISABLE_COMPILATION_CACHE: "compiled kernels are cached by their source hash only",
}


class IHostMemory(bytes):
    """A serialized engine: bytes with TensorRT's `nbytes`; write it to a file or pass it to deserialize_cuda_engine."""

    @property
    def nbytes(self) -> int:
        return len(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False


class IOptimizationProfile(OptimizationProfile, TrtObject):
    """min/opt/max shapes per input; `get_shape(name)` → [min, opt, max] as Dims, or [] when unset."""

    def set_shape(self, input: str, min, opt, max) -> None:  # noqa: A002 - TensorRT's names
        mn, op, mx = Dims(min), Dims(opt), Dims(max)
        if not (len(mn) == len(op) == len(mx)):
            raise UsageError(f"profile shapes for {input!r} have different ranks", "give min, opt and max of one rank")
        if any(not (0 <= a <= b <= c) for a, b, c in zip(mn, op, mx)):
            raise UsageError(f"profile shapes for {input!r} need 0 <= min <= opt <= max per dimension, got "
                             f"{tuple(mn)}, {tuple(op)}, {tuple(mx)}", "fix the profile")
        super().set_shape(input, mn, op, mx)

    def get_shape(self, input: str) -> list:  # noqa: A002
        s = self.shapes.get(input)
        return [] if s is None else [Dims(d) for d in s]

    def __bool__(self) -> bool:
        return True


class ITimingCache(TrtObject):
    """A timing cache held in memory: `serialize()` gives the JSON bytes to store, `combine()` merges another."""

    def __init__(self, data: bytes = b""):
        self.cache = TimingCache.deserialize(data) if data else TimingCache()

    def serialize(self) -> bytes:
        return self.cache.serialize()

    def combine(self, other: "ITimingCache", ignore_mismatch: bool = False) -> bool:
        self.cache.merge(other.cache)
        return True

    def reset(self) -> bool:
        self.cache = TimingCache()
        return True


class IBuilderConfig(TrtObject):
    def __init__(self, device=None):
        self.config = BuilderConfig(device=str(device) if device is not None else None)
        self._flags = 1 << int(BuilderFlag.TF32)
        self._pools: dict[MemoryPoolType, int] = {}
        self._cache: ITimingCache | None = None
        self.profiling_verbosity = ProfilingVerbosity.LAYER_NAMES_ONLY
        self.avg_timing_iterations = 1
        self.default_device_type = None
        self.int8_calibrator = None
        self._calibration_profile = None
        self.progress_monitor: IProgressMonitor | None = None   # phase_start / step_complete / phase_finish
        # accepted, no effect here (docs/migrating-from-tensorrt.md): one portable engine format, one stream
        self.hardware_compatibility_level = None
        self.max_aux_streams = 0
        self.profile_stream = 0
        self.engine_capability = None
        self.DLA_core = -1

    # ---- flags ---------------------------------------------------------------------------------
    @property
    def flags(self) -> int:
        return self._flags

    @flags.setter
    def flags(self, value: int) -> None:
        for flag in BuilderFlag:
            if (int(value) >> int(flag) & 1) != self.get_flag(flag):
                (self.set_flag if int(value) >> int(flag) & 1 else self.clear_flag)(flag)

    def set_flag(self, flag: BuilderFlag) -> None:
        flag = BuilderFlag(flag)
        if flag in _REFUSED:
            raise UsageError(f"BuilderFlag.{flag.name} is not supported: {_REFUSED[flag]}",
                             "see docs/migrating-from-tensorrt.md")
        if flag in _NO_EFFECT:
            get_logger().info(f"BuilderFlag.{flag.name} has no effect: {_NO_EFFECT[flag]}")
        self._flags |= 1 << int(flag)
        self._apply()

    def clear_flag(self, flag: BuilderFlag) -> None:
        self._flags &= ~(1 << int(BuilderFlag(flag)))
        self._apply()

    def get_flag(self, flag: BuilderFlag) -> bool:
        return bool(self._flags >> int(BuilderFlag(flag)) & 1)

    def _apply(self) -> None:
        c = self.config
        c.fp16, c.bf16 = self.get_flag(BuilderFlag.FP16), self.get_flag(BuilderFlag.BF16)
        c.tf32 = self.get_flag(BuilderFlag.TF32)
        c.use_timing_cache = not self.get_flag(BuilderFlag.DISABLE_TIMING_CACHE)
        c.error_on_timing_cache_miss = self.get_flag(BuilderFlag.ERROR_ON_TIMING_CACHE_MISS)
        c.int8, c.fp8 = self.get_flag(BuilderFlag.INT8), self.get_flag(BuilderFlag.FP8)
        c.sparsity = "enable" if self.get_flag(BuilderFlag.SPARSE_WEIGHTS) else "disable"
        c.precision_constraints = ("obey" if self.get_flag(BuilderFlag.OBEY_PRECISION_CONSTRAINTS) else
                                   "prefer" if self.get_flag(BuilderFlag.PREFER_PRECISION_CONSTRAINTS) else "none")

    # ---- tactic sources: TensorRT's libraries; tensorforge's tactics are its own (torch, Triton, oneDNN) ---------
    def set_tactic_sources(self, tactic_sources: int) -> bool:
        """Accepted and kept (get_tactic_sources returns it); it changes nothing: every candidate is timed."""
        self._tactic_sources = int(tactic_sources)
        get_logger().info("set_tactic_sources has no effect: tensorforge's tactics are not TensorRT's libraries")
        return True

    def get_tactic_sources(self) -> int:
        return getattr(self, "_tactic_sources", 0)

    # ---- calibration -----------------------------------------------------------------------------
    def set_calibration_profile(self, profile: OptimizationProfile) -> bool:
        self._calibration_profile = profile
        return True

    def get_calibration_profile(self):
        return self._calibration_profile

    # ---- memory, level, profiles, timing cache ---------------------------------------------------
    def set_memory_pool_limit(self, pool: MemoryPoolType, pool_size: int) -> None:
        pool = MemoryPoolType(pool)
        if pool is not MemoryPoolType.WORKSPACE:
            raise UsageError(f"MemoryPoolType.{pool.name} is not supported", "only WORKSPACE has a meaning here")
        self._pools[pool] = int(pool_size)
        self.config.workspace_bytes = int(pool_size)

    def get_memory_pool_limit(self, pool: MemoryPoolType) -> int:
        return self._pools.get(MemoryPoolType(pool), 0)

    @property
    def max_workspace_size(self) -> int:
        return self.get_memory_pool_limit(MemoryPoolType.WORKSPACE)

    @max_workspace_size.setter
    def max_workspace_size(self, value: int) -> None:
        self.set_memory_pool_limit(MemoryPoolType.WORKSPACE, value)

    @property
    def builder_optimization_level(self) -> int:
        return self.config.optimization_level

    @builder_optimization_level.setter
    def builder_optimization_level(self, level: int) -> None:
        if not 0 <= int(level) <= 5:
            raise UsageError(f"builder optimization level {level} is out of range", "use 0 … 5")
        self.config.optimization_level = int(level)

    def add_optimization_profile(self, profile: OptimizationProfile) -> int:
        if not isinstance(profile, OptimizationProfile):
            raise UsageError("add_optimization_profile takes a profile from builder.create_optimization_profile()",
                             "create one with builder.create_optimization_profile()")
        return self.config.add_optimization_profile(profile)

    @property
    def num_optimization_profiles(self) -> int:
        return len(self.config.profiles)

    def create_timing_cache(self, serialized_timing_cache: bytes = b"") -> ITimingCache:
        return ITimingCache(bytes(serialized_timing_cache or b""))

    def set_timing_cache(self, cache: ITimingCache, ignore_mismatch: bool = False) -> bool:
        if not isinstance(cache, ITimingCache):
            raise UsageError("set_timing_cache takes a cache from config.create_timing_cache()",
                             "create one with config.create_timing_cache(data)")
        self._cache = cache
        self.config.timing_cache = cache.cache
        return True

    def get_timing_cache(self) -> ITimingCache | None:
        return self._cache


class Builder(TrtObject):
    """trt.Builder(logger [, device]): networks, configs, profiles and serialized engines.

    `platform_has_fast_fp16` (and `platform_has_tf32`) are True only on CUDA: on the CPU a script that guards
    `config.set_flag(trt.BuilderFlag.FP16)` with it builds float32 (CPU float16 is slower than float32 here)."""

    def __init__(self, logger: Logger | None = None, device=None):
        self.logger = logger or Logger()
        self.device = resolve_device(device)
        self.max_threads = 1           # accepted: builds run on the calling thread

    def create_network(self, flags: int = 0) -> NetworkDefinition:
        known = (1 << int(NetworkDefinitionCreationFlag.EXPLICIT_BATCH)) | (1 << int(NetworkDefinitionCreationFlag.STRONGLY_TYPED))
        if int(flags) & ~known:
            raise UsageError(f"unknown network creation flags {flags:#x}", "use NetworkDefinitionCreationFlag values")
        return NetworkDefinition(int(flags))

    def create_builder_config(self) -> IBuilderConfig:
        return IBuilderConfig(self.device)

    def create_optimization_profile(self) -> IOptimizationProfile:
        return IOptimizationProfile()

    @property
    def platform_has_fast_fp16(self) -> bool:
        return self.device.type == "cuda"

    @property
    def platform_has_tf32(self) -> bool:
        return self.device.type == "cuda"

    @property
    def platform_has_fast_int8(self) -> bool:
        return self.device.type == "cuda"

    def is_network_supported(self, network: NetworkDefinition, config: IBuilderConfig) -> bool:
        network.to_ir()
        return True

    def build_serialized_network(self, network: NetworkDefinition, config: IBuilderConfig) -> IHostMemory:
        strongly = network.get_flag(NetworkDefinitionCreationFlag.STRONGLY_TYPED)
        if strongly and (config.config.fp16 or config.config.bf16):
            raise UsageError("a STRONGLY_TYPED network takes its types from the network; FP16/BF16 flags conflict",
                             "clear BuilderFlag.FP16/BF16 or create the network without STRONGLY_TYPED")
        net = network.to_ir()
        settings = replace(config.config, strongly_typed=strongly,
                           layer_precisions=list(config.config.layer_precisions) + network._precision_entries(),
                           layer_output_types=list(config.config.layer_output_types) + network._output_type_entries(),
                           dynamic_ranges={**config.config.dynamic_ranges, **network._dynamic_ranges})
        if config.int8_calibrator is not None and (settings.int8 or settings.fp8):
            profile = config.get_calibration_profile() or (settings.profiles[0] if settings.profiles else None)
            settings.calibration = as_source(config.int8_calibrator, net, profile)
            settings.calibration_profile = profile
        monitor = config.progress_monitor
        if monitor is None:
            engine = build_engine(net, settings)
            self.logger.info(f"built engine {engine.name!r}: {len(engine.layers)} layers")
            return IHostMemory(to_bytes(engine))
        bridge = MonitorBridge(monitor)
        monitor.phase_start(TOP, None, 3)
        try:
            bridge.top_step(0)
            engine = build_engine(net, settings, progress=bridge)
            bridge.finish()
            bridge.top_step(1)
            plan = IHostMemory(to_bytes(engine))
            bridge.top_step(2)
        except BuildCancelled:
            bridge.finish()
            self.logger.warning("build cancelled by the progress monitor")
            return None
        finally:
            monitor.phase_finish(TOP)
        self.logger.info(f"built engine {engine.name!r}: {len(engine.layers)} layers")
        return plan
