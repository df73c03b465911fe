"""builder — Network + BuilderConfig → Engine.

Entry point: `Builder(...).build(network, config)` / `build_engine(network, config)`.
Steps: resolve profiles → passes (folding, fusion) → precision → shape/dtype inference at every profile
point → placement (host shape arithmetic vs device) → tactic choice per layer → Engine.
May import every room except api, compare, cli.
"""

from .builder import build_engine
from .config import BuilderConfig, OptimizationProfile

__all__ = ["BuilderConfig", "OptimizationProfile", "build_engine"]
