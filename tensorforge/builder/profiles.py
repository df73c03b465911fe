"""Resolve optimisation profiles against the network's inputs.

Each profile ends up with (min, opt, max) for every input. Static inputs get their own shape three times.
A dynamic dimension with no profile entry is fixed to 1 with a warning, as trtexec does. Checks: rank
matches, static dimensions are respected, and min ≤ opt ≤ max elementwise.
"""

from ..ir import Network
from ..util.errors import ShapeError
from ..util.log import get_logger
from .config import OptimizationProfile

Resolved = dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]


def _fmt(shape) -> str:
    return "x".join(str(d) for d in shape)


def resolve_profiles(net: Network, profiles: list[OptimizationProfile]) -> list[Resolved]:
    given = profiles or [OptimizationProfile()]
    out: list[Resolved] = []
    for index, profile in enumerate(given):
        unknown = set(profile.shapes) - set(net.inputs)
        if unknown:
            raise ShapeError(f"profile {index} names {sorted(unknown)[0]!r}, which is not an input of the network",
                             f"inputs are: {', '.join(net.inputs)}")
        resolved: Resolved = {}
        for name in net.inputs:
            declared = net.tensors[name].shape
            if name in profile.shapes:
                mn, opt, mx = profile.shapes[name]
                _check(name, declared, mn, opt, mx)
            else:
                if declared is None:
                    raise ShapeError(f"input {name!r} has unknown rank and no shape was given",
                                     f"give one with --shapes={name}:1x3x224x224 or --optShapes")
                fixed = tuple(d if isinstance(d, int) and d >= 0 else 1 for d in declared)
                if fixed != tuple(declared):
                    get_logger().warning(f"dynamic dimensions of input {name!r} ({_fmt(declared)}) have no profile; "
                                         f"fixing them to 1: {_fmt(fixed)} (give --minShapes/--optShapes/--maxShapes)")
                mn = opt = mx = fixed
            resolved[name] = (tuple(mn), tuple(opt), tuple(mx))
        out.append(resolved)
    return out


def _check(name, declared, mn, opt, mx) -> None:
    if not (len(mn) == len(opt) == len(mx)):
        raise ShapeError(f"input {name!r}: min/opt/max shapes have different ranks ({_fmt(mn)}, {_fmt(opt)}, {_fmt(mx)})",
                         "give all three with the same number of dimensions")
    if declared is not None and len(declared) != len(mn):
        raise ShapeError(f"input {name!r} has rank {len(declared)} ({_fmt(declared)}) but the profile gives rank {len(mn)}",
                         "match the model's input rank")
    for axis, (a, b, c) in enumerate(zip(mn, opt, mx)):
        if not (0 <= a <= b <= c):
            raise ShapeError(f"input {name!r} axis {axis}: need min <= opt <= max, got {a}, {b}, {c}", "fix the profile")
        if declared is not None and isinstance(declared[axis], int) and declared[axis] >= 0 and not (a == b == c == declared[axis]):
            raise ShapeError(f"input {name!r} axis {axis} is static ({declared[axis]}) in the model, but the profile gives "
                             f"{a}..{c}", "keep static dimensions at their value")


def shape_points(resolved: list[Resolved]) -> list[dict[str, tuple[int, ...]]]:
    """The distinct input-shape assignments worth analysing: min, opt and max of every profile."""
    points: list[dict] = []
    for prof in resolved:
        for k in range(3):
            p = {name: shapes[k] for name, shapes in prof.items()}
            if p not in points:
                points.append(p)
    return points
