"""int8 / fp8 / best through the PyTorch entry points, as `tfg.build` takes them:

    torch.compile(model, backend="tensorforge",
                  options={"int8": True, "calibration_data": [(x1,), (x2,)], "calibration_cache": "m.cache"})
    tfg.compile(model, (x,), fp8=True, calibration_data=loader_of_tensors)

`calibration_data` is what the model takes: an iterable of input tuples (or of single tensors for a one-input
model), as `example_inputs` are given — the engine's input names are the exported graph's, which a PyTorch user
never sees. A folder or files of .npy/.npz (keyed by those names) are passed on as `tfg.build` reads them.
Calibration runs the engine's own network on those batches (builder/calibration), so it needs the whole graph as
one engine: with graph breaks, the engines after a break would see PyTorch's intermediate values, not these
inputs, and the build is refused naming the breaks. Without calibration data the ranges are placeholders, as
trtexec's --int8 without --calib (the builder warns). The options go through builder.calibration.configure.
"""

import copy
import os

from ..util.errors import UsageError

QUANT_OPTIONS = {"int8", "fp8", "best", "calibration_data", "calibration_cache", "calibration_algorithm"}


class PositionalBatches:
    """Calibration batches in the model's positional form; `feeds(names)` names them as the engine's inputs."""

    def __init__(self, data):
        self.data = data

    def feeds(self, names: list[str]) -> list[dict]:
        out = []
        for item in self.data:
            values = tuple(item) if isinstance(item, (tuple, list)) else (item,)
            if len(values) != len(names):
                raise UsageError(f"a calibration batch has {len(values)} value(s) but the compiled graph takes "
                                 f"{len(names)} input(s)", "give each batch as the model's inputs, a tuple like "
                                 "example_inputs")
            out.append(dict(zip(names, values)))
        return out


def configure_quant(config, options: dict) -> None:
    """The QUANT_OPTIONS of `options` onto `config` (tfg.build's semantics and errors)."""
    from ..builder.calibration import configure
    data = options.get("calibration_data")
    if data is not None and not isinstance(data, (str, os.PathLike)):
        data = PositionalBatches(data)
    configure(config, options.get("int8", False), options.get("fp8", False), options.get("best", False), data,
              options.get("calibration_cache"), options.get("calibration_algorithm", "entropy2"))


def positional(config) -> bool:
    source = getattr(config, "calibration", None)
    return source is not None and isinstance(source.batches, PositionalBatches)


def bind_calibration(config, input_names: list[str]):
    """`config` with positional calibration batches named as this engine's inputs (a copy; `config` is shared by
    the engines of one graph), or `config` itself when there are none."""
    if not positional(config):
        return config
    bound = copy.copy(config)
    bound.calibration = copy.copy(config.calibration)
    bound.calibration.batches = config.calibration.batches.feeds(input_names)
    return bound


def refuse_with_breaks(config, breaks: list) -> None:
    if positional(config) and breaks:
        where = ", ".join(f"{node} ({op})" for node, op, _ in breaks[:4]) + (" …" if len(breaks) > 4 else "")
        raise UsageError(f"calibration_data needs the whole graph as one engine; this graph has {len(breaks)} "
                         f"break(s): {where}", "calibrate without the breaks (a calibration_cache from a full "
                         "graph, or int8 with placeholder ranges), or remove the unsupported ops")
