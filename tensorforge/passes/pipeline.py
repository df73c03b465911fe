"""The one ordered list of passes, by builder optimisation level (0 = none … 5 = all).

`optimize(net, shape_points, level)` runs every pass whose minimum level ≤ `level`, in order, and
returns {pass name: changes made}. Fusion rules (passes/rules/) join this list as they land.
"""

from typing import Callable

from ..ir import Network
from ..util.log import get_logger
from .constant_fold import fold_constants
from .dead_code import remove_dead_layers

# (name, minimum level, function(net, shape_points=..., **options) -> changes)
PASSES: list[tuple[str, int, Callable[..., int]]] = [
    ("dead-code", 0, remove_dead_layers),
    ("constant-fold", 1, fold_constants),
    ("dead-code", 1, remove_dead_layers),
]


def optimize(net: Network, shape_points: list[dict], level: int = 3, **options) -> dict[str, int]:
    log = get_logger()
    report: dict[str, int] = {}
    for name, min_level, fn in PASSES:
        if level < min_level:
            continue
        changes = fn(net, shape_points=shape_points, **options)
        report[name] = report.get(name, 0) + changes
        log.verbose(f"pass {name}: {changes} change(s), {len(net.layers)} layers")
    return report
