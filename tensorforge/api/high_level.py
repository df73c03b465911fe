"""build / load / Engine: the high-level API of SPEC.md §2.

    engine = tfg.build("model.onnx", fp16=True, shapes={"x": ((1,3,224,224), (8,3,224,224), (32,3,224,224))})
    engine.save("model.engine")
    engine = tfg.load("model.engine", device="cuda")
    out = engine.run({"x": x})          # dict in, dict out; numpy in → numpy out
    out = engine(x)                     # positional; one output → that tensor
"""

import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..engine import Engine as EngineData
from ..engine import to_bytes
from ..runtime import ExecutionContext, load_engine_file
from ..util.cpu_threads import check_threads, cpu_threads
from ..util.device import resolve_device
from ..util.errors import InputError, UsageError
from ..util.fileio import atomic_write
from ..util.values import TensorSequence

if TYPE_CHECKING:
    from ..builder import BuilderConfig


def _as_profile(shapes: dict | list | None) -> list:
    """{name: (min, opt, max) or shape} → one profile; a list of such dicts → one profile each (the runtime runs a
    call under the first profile its shapes fit)."""
    if not shapes:
        return []
    if isinstance(shapes, (list, tuple)):
        if not all(isinstance(p, dict) and p for p in shapes):
            raise UsageError("shapes=[...] takes one non-empty {input: (min, opt, max)} dict per profile",
                             "e.g. shapes=[{'x': ((1, 3), (2, 3), (4, 3))}, {'x': ((8, 3), (8, 3), (16, 3))}]")
        return [p for one in shapes for p in _as_profile(one)]
    from ..builder import OptimizationProfile
    prof = OptimizationProfile()
    for name, spec in shapes.items():
        if len(spec) == 3 and all(isinstance(s, (tuple, list)) for s in spec):
            prof.set_shape(name, *spec)
        else:
            prof.set_shape(name, spec, spec, spec)
    return [prof]


def parse(model, external_data_dir=None):
    """An ONNX path/bytes/ModelProto → Network, nothing built: an unsupported op fails here (the parser is
    imported on first use, like build's)."""
    from ..parser import parse_model
    return parse_model(model, external_data_dir=external_data_dir)


def build(model, fp16: bool = False, bf16: bool = False, shapes: dict | None = None, timing_cache: str | None = None,
          device=None, example_inputs=None, tf32: bool = True, optimization_level: int = 3,
          config: "BuilderConfig | None" = None, external_data_dir=None, int8: bool = False, fp8: bool = False,
          best: bool = False, calibration_data=None, calibration_cache=None, calibration_algorithm: str = "entropy2",
          threads: int | None = None, **export_options) -> "Engine":
    """Build an engine from an ONNX path/bytes/ModelProto, or an nn.Module with `example_inputs`.

    `shapes` maps input name → (min, opt, max) or a single static shape; a list of such dicts builds one
    optimization profile each. `external_data_dir`: the folder of a
    model given as bytes or a ModelProto whose weights live in external files (never the current directory).
    `int8`/`fp8`/`best` quantize Conv/Gemm/MatMul from `calibration_data` (an iterable of feeds, or a folder of
    .npy/.npz) and/or `calibration_cache` (read when it exists, written after calibrating): docs/precision.md.
    `threads`: torch's intra-op CPU threads while building (CPU tactic timing) and in the engine's contexts
    (onnxruntime's intra_op_num_threads; docs/runtime.md, "CPU threads"); None leaves torch's setting alone.
    """
    # imported here, not at module level: loading and running an engine never loads the parser or builder
    from ..builder import BuilderConfig, build_engine
    from ..parser import parse_model
    from ..parser.from_torch import export_module
    threads = check_threads(threads)
    if isinstance(model, torch.nn.Module):
        if example_inputs is None:
            raise UsageError("building from an nn.Module needs example_inputs", "pass example_inputs=(tensor, ...)")
        model = export_module(model, example_inputs, **export_options)
    elif export_options:
        raise UsageError(f"tfg.build() got unknown keyword argument(s): {', '.join(sorted(export_options))}",
                         "extra keywords are torch.onnx.export options and apply only when building an nn.Module")
    network = parse_model(model, external_data_dir=external_data_dir)
    if config is None:
        config = BuilderConfig(fp16=fp16, bf16=bf16, tf32=tf32, profiles=_as_profile(shapes),
                               optimization_level=optimization_level, timing_cache_path=timing_cache,
                               device=str(device) if device is not None else None)
        from ..builder.calibration import configure
        configure(config, int8, fp8, best, calibration_data, calibration_cache, calibration_algorithm)
    with cpu_threads(threads):
        built = build_engine(network, config)
    return Engine(built, device, threads=threads)


def load(path, device=None, threads: int | None = None) -> "Engine":
    """Load an engine file written by `Engine.save` or `tensorforge exec --saveEngine`; `threads` as in build."""
    return Engine(load_engine_file(path), device, threads=threads)


class Engine:
    """A built engine ready to run on one device (CUDA when present, else CPU).

    Safe to call from several threads: `run` borrows an idle ExecutionContext from a small pool (one is made when
    every context is busy, sharing the first one's device weights) and gives it back afterwards, so each context is
    used by one thread at a time (docs/runtime.md, "Threads"). `context` is the first one, for single-thread use.
    """

    def __init__(self, data: EngineData, device=None, threads: int | None = None):
        self.data = data
        self.device = resolve_device(device)
        self.threads = check_threads(threads)      # every context of this engine runs its calls with it
        self._context: ExecutionContext | None = None
        self._idle: list[ExecutionContext] = []       # contexts not running now (the pool)
        self._pool_lock = threading.Lock()

    @property
    def context(self) -> ExecutionContext:
        with self._pool_lock:
            if self._context is None:
                self._context = ExecutionContext(self.data, self.device, threads=self.threads)
                self._idle.append(self._context)
            return self._context

    def _borrow(self) -> ExecutionContext:
        first = self.context
        with self._pool_lock:
            if self._idle:
                return self._idle.pop()
        # every context is running in another thread: one more, sharing the device weights (made outside the lock)
        return ExecutionContext(self.data, self.device, shared_weights=first.device_weights, threads=self.threads)

    def _give_back(self, ctx: ExecutionContext) -> None:
        with self._pool_lock:
            self._idle.append(ctx)

    @property
    def input_names(self) -> list[str]:
        return self.data.input_names

    @property
    def output_names(self) -> list[str]:
        return self.data.output_names

    def save(self, path) -> None:
        atomic_write(Path(path), to_bytes(self.data))

    def serialize(self) -> bytes:
        return to_bytes(self.data)

    def run(self, feed: dict) -> dict:
        if not isinstance(feed, dict):
            raise InputError("Engine.run takes a dict of input name → tensor", "use engine(x, ...) for positional inputs")
        numpy_in = any(isinstance(v, np.ndarray) for v in feed.values())
        tensors = {k: _to_tensor(k, v) for k, v in feed.items()}
        ctx = self._borrow()
        try:
            with ctx._gate():             # the device → host copy below synchronises: not during another's capture
                out = ctx.run(tensors)
                if numpy_in:
                    return {k: _to_numpy(v) for k, v in out.items()}
                return out
        finally:
            self._give_back(ctx)

    def __call__(self, *args):
        names = self.input_names
        if len(args) != len(names):
            raise InputError(f"engine takes {len(names)} input(s) ({', '.join(names)}), got {len(args)}",
                             "pass one tensor per input, in order")
        out = self.run(dict(zip(names, args)))
        values = [out[n] for n in self.output_names]
        return values[0] if len(values) == 1 else tuple(values)


def _to_numpy(value):
    """An output for a numpy caller: tensors (and a sequence's tensors) → numpy; Python values (string labels,
    ZipMap's list of dicts: ir/ops/ml_zipmap.py) as they are."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, TensorSequence):
        return [t.detach().cpu().numpy() for t in value]
    return value


def _to_tensor(name, value) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.require(value, requirements="C"))   # keeps 0-d arrays 0-d
    raise InputError(f"input {name!r} is a {type(value).__name__}, not a tensor", "pass a torch.Tensor or numpy array")
