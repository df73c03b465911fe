"""Per-point tactics of a dynamic profile: the fastest kernel at min and at max as well as at opt.

Entry point: `choose_point_tactics(net, device, config, resolved, points, envs, choose, timed)` → {"min": n,
"max": n} (layers whose choice differs there; `progress` sees each pass as the opt pass does); nothing when the opt point's choice timed nothing (`timed` false:
untimed CPU builds, level 0) or `config.point_tactics` is off (the opt point's kernels everywhere, as TensorRT does;
one timing pass). TensorRT times tactics at the opt shape only, so an engine with a range profile
runs the opt point's kernels at every shape; a GEMM timed at 512 rows can be the wrong one at 32 (BERT-base on the
H200, profile (1,32)..(8,64)..(32,128): the opt-point cuBLAS GEMM with a separate bias add and GELU at (1,32) made
the dynamic engine 1.056× the static one there). Here the layer-by-layer choice runs again at min and at max of
the first profile (`choose`: builder/tactics.py `choose_tactics`, timing cache shared, so identical questions are
timed once), and each layer whose winner differs records it in `layer.point_tactics`; `layer.tactic` stays the opt
point's. The runtime (runtime/point_select.py) runs, per input shape, the kernels of the point nearest in log-volume.
Costs: up to 3× the tactic timing of a static build, nothing at run time (one kernel list per point, chosen once per
input-shape signature).
"""

from ..util.log import get_logger

POINTS = {"min": 0, "max": 2}


def _has_range(profile: dict) -> bool:
    return any(shapes[0] != shapes[1] or shapes[2] != shapes[1] for shapes in profile.values())


def choose_point_tactics(net, device, config, resolved: list, points: list, envs: list, choose,
                         timed: bool, progress=None) -> dict[str, int]:
    if not config.point_tactics or not timed or not resolved or not _has_range(resolved[0]) or config.optimization_level == 0:
        return {}
    opt = {layer.name: layer.tactic for layer in net.layers}
    found: dict[str, dict[str, str]] = {}
    counts = {}
    for label, k in POINTS.items():
        point = {n: s[k] for n, s in resolved[0].items()}
        if point == {n: s[1] for n, s in resolved[0].items()}:
            continue
        get_logger().info(f"timing tactics at the profile's {label} point {point}")
        choose(net, device, config, progress=progress, opt_point=point, opt_env=envs[points.index(point)])
        counts[label] = 0
        for layer in net.layers:
            if layer.placement != "host" and layer.tactic != opt[layer.name]:
                found.setdefault(layer.name, {})[label] = layer.tactic
                counts[label] += 1
            layer.tactic = opt[layer.name]
    for layer in net.layers:
        layer.point_tactics = found.get(layer.name)
    if counts:
        get_logger().info("per-point tactics: " + ", ".join(f"{n} layer(s) choose another kernel at {label}"
                                                             for label, n in counts.items()))
    return counts
