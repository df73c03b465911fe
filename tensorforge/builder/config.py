"""BuilderConfig: the one object that says how to build. Passed explicitly; no global state.

Field ↔ trtexec flag: fp16 ↔ --fp16, bf16 ↔ --bf16, tf32 ↔ not --noTF32, profiles ↔ --minShapes/--optShapes/
--maxShapes, optimization_level ↔ --builderOptimizationLevel, workspace_bytes ↔ --memPoolSize=workspace:N,
timing_cache_path ↔ --timingCacheFile, use_timing_cache ↔ not --noBuilderCache, device ↔ --device.
Precision (docs/precision.md): int8 ↔ --int8, fp8 ↔ --fp8, best ↔ --best, strongly_typed ↔ --stronglyTyped,
precision_constraints ↔ --precisionConstraints, layer_precisions ↔ --layerPrecisions, layer_output_types ↔
--layerOutputTypes, sparsity ↔ --sparsity, calibration (a CalibrationSource: batches, cache, algorithm) ↔
--calib/--calibData/--calibAlgo, calibration_profile ↔ --minShapesCalib/--optShapesCalib/--maxShapesCalib,
dynamic_ranges ↔ ITensor.set_dynamic_range (tensor → amax).
"""

from dataclasses import dataclass, field

Dims = tuple[int, ...]


@dataclass
class OptimizationProfile:
    """Per input name: (min, opt, max) shapes. Inputs whose shape is fully static need no entry."""
    shapes: dict[str, tuple[Dims, Dims, Dims]] = field(default_factory=dict)

    def set_shape(self, name: str, min: Dims, opt: Dims, max: Dims) -> None:  # noqa: A002 - TensorRT's names
        self.shapes[name] = (tuple(min), tuple(opt), tuple(max))

    def get_shape(self, name: str):
        return self.shapes.get(name)


@dataclass
class BuilderConfig:
    fp16: bool = False
    bf16: bool = False
    tf32: bool = True
    profiles: list[OptimizationProfile] = field(default_factory=list)
    optimization_level: int = 3
    workspace_bytes: int | None = None
    timing_cache_path: str | None = None
    use_timing_cache: bool = True
    error_on_timing_cache_miss: bool = False    # a timed layer missing from the cache fails the build
    timing_cache: object | None = None     # a builder.timing_cache.TimingCache, updated in place (set_timing_cache)
    device: str | None = None
    max_fold_elements: int = 1 << 24
    int8: bool = False
    fp8: bool = False
    best: bool = False
    strongly_typed: bool = False
    precision_constraints: str = "none"                 # none | prefer | obey
    layer_precisions: list = field(default_factory=list)    # [(name or "*", "fp32"|"fp16"|"bf16"|"int8"|"fp8")]
    layer_output_types: list = field(default_factory=list)  # [(name or "*", ["fp16", "fp32", ...])]
    sparsity: str = "disable"                           # disable | enable | force
    calibration: object | None = None                   # builder.calibration.CalibrationSource
    calibration_profile: OptimizationProfile | None = None
    dynamic_ranges: dict = field(default_factory=dict)  # tensor name → amax (symmetric range)
    best_by_timing: bool = True                         # --best: INT8 or FP16 per layer by timing (builder/best.py)
    time_every_layer: bool = False                      # time CPU convolutions too (--best's trial builds weigh them)
    context_timing: bool = True         # close calls timed again inside the whole network (context_timing.py)
    point_tactics: bool = True          # a range profile's min and max timed too, a kernel per point (point_tactics.py)

    def add_optimization_profile(self, profile: OptimizationProfile) -> int:
        self.profiles.append(profile)
        return len(self.profiles) - 1

    def flags(self) -> list[str]:
        out = [n for n in ("fp16", "bf16", "int8", "fp8", "best") if getattr(self, n)]
        if self.strongly_typed:
            out.append("stronglyTyped")
        if not self.tf32:
            out.append("noTF32")
        if self.precision_constraints != "none":
            out.append(f"precisionConstraints={self.precision_constraints}")
        if self.sparsity != "disable":
            out.append(f"sparsity={self.sparsity}")
        return out
