"""passes — Network → Network rewrites: constant folding, dead-code removal, fusion rules.

Entry point: `pipeline.optimize(net, shape_points, level)`; `pipeline.PASSES` is the one ordered list
(`pipeline.LATE_PASSES`, pointwise grouping, runs after precision conversion: `optimize(..., stage="late")`).
Each pass mutates the network it is given (the builder hands it a copy) and returns a count of changes.
Imports ir, util.
"""

from .pipeline import PASSES, optimize

__all__ = ["PASSES", "optimize"]
