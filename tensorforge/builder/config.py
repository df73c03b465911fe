"""BuilderConfig: the one object that says how to build. Passed explicitly; no global state.

Field ↔ trtexec flag: fp16 ↔ --fp16, bf16 ↔ --bf16, tf32 ↔ not --noTF32, profiles ↔ --minShapes/--optShapes/
--maxShapes, optimization_level ↔ --builderOptimizationLevel, workspace_bytes ↔ --memPoolSize=workspace:N,
timing_cache_path ↔ --timingCacheFile, use_timing_cache ↔ not --noBuilderCache, device ↔ --device.
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
    timing_cache: object | None = None     # a builder.timing_cache.TimingCache, updated in place (set_timing_cache)
    device: str | None = None
    max_fold_elements: int = 1 << 24

    def add_optimization_profile(self, profile: OptimizationProfile) -> int:
        self.profiles.append(profile)
        return len(self.profiles) - 1

    def flags(self) -> list[str]:
        out = [n for n in ("fp16", "bf16") if getattr(self, n)]
        if not self.tf32:
            out.append("noTF32")
        return out
