"""Shapes and dtypes of a network under construction, before any optimization profile exists.

`infer_infos(net, layers)` runs `layers` (a prefix of the network, in order) through `ir.interpret.propagate`
on meta tensors — no memory, no compute — once per probe size of the dynamic input dimensions (16, then 24)
and merges the results: a dimension equal in both runs is static, one that differs reads -1, as do the
dimensions of outputs only known at run time (ir/dynamic.py placeholders). A layer that cannot be computed is
reported as a one-line UsageError naming the API layer it came from.
"""

from ...ir import Layer, Network, TensorInfo
from ...ir.dynamic import placeholder_info
from ...ir.interpret import InferenceFailure, propagate
from ...util.errors import UsageError

PROBES = (16, 24)


def infer_infos(net: Network, layers: list[Layer]) -> dict[str, TensorInfo]:
    """TensorInfo of every input, constant and output of `layers`."""
    view = Network(net.name)
    view.inputs, view.tensors, view.constants, view.layers = net.inputs, net.tensors, net.constants, layers
    dynamic = any(not isinstance(d, int) or d < 0 for n in net.inputs for d in net.tensors[n].shape or ())
    points = []
    for probe in (PROBES if dynamic else PROBES[:1]):
        points.append({n: tuple(d if isinstance(d, int) and d >= 0 else probe for d in net.tensors[n].shape)
                       for n in net.inputs})
    try:
        envs = [propagate(view, p) for p in points]
    except InferenceFailure as e:
        where = e.layer.origin[0] if e.layer.origin else e.layer.name
        note = f" (dynamic dimensions probed at {PROBES[0]} and {PROBES[1]})" if dynamic else ""
        raise UsageError(f"layer {where!r} ({e.layer.op}) cannot be computed: {type(e.cause).__name__}: "
                         f"{e.cause}{note}", "check the layer's parameters and its inputs' shapes") from e
    infos = {}
    for name, t0 in envs[0].items():
        ts = [env[name] for env in envs]
        if any(placeholder_info(t) is not None for t in ts):
            info = placeholder_info(ts[0])
            shape = (-1,) * t0.dim() if info.rank_known else None
        elif len({t.dim() for t in ts}) != 1:
            shape = None
        else:
            shape = tuple(int(t0.shape[d]) if all(t.shape[d] == t0.shape[d] for t in ts) else -1
                          for d in range(t0.dim()))
        infos[name] = TensorInfo(name, t0.dtype, shape)
    for name in net.inputs:
        infos[name] = TensorInfo(name, net.tensors[name].dtype, net.tensors[name].shape)
    return infos
