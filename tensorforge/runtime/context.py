"""ExecutionContext: runs an Engine's layers on one device.

Per context (once): weights copied to the device (and to the host for host-placed shape arithmetic),
one kernel instantiated per layer from its tactic id, and the last use of every tensor computed so
activations are released as soon as nothing reads them (peak memory ≈ the widest live set, not the sum).

Per call: inputs checked against the engine (names, dtypes, rank, profile bounds), moved to the device
if needed, then every layer's kernel runs in order. Host layers see CPU tensors; a host value read by
a device layer is copied to the device (a few int64s).
"""

import torch

from ..engine import Engine
from ..kernels import instantiate
from ..util.device import resolve_device
from ..util.errors import BuildError, InputError, ShapeError

_DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
                torch.int64: "int64", torch.int32: "int32", torch.bool: "bool"}


def _fmt(shape) -> str:
    return "x".join(str(d) for d in shape)


class ExecutionContext:
    def __init__(self, engine: Engine, device=None):
        self.engine = engine
        self.device = resolve_device(device)
        self.host = torch.device("cpu")
        needs_host = {i for layer in engine.layers if layer.placement == "host" for i in layer.inputs if i}
        needs_dev = {i for layer in engine.layers if layer.placement != "host" for i in layer.inputs if i}
        needs_dev |= set(engine.output_names)
        self._dev_consts = {k: v.to(self.device) for k, v in engine.constants.items() if k in needs_dev}
        self._host_consts = {k: v for k, v in engine.constants.items() if k in needs_host}
        self.kernels = []
        for layer in engine.layers:
            where = self.host if layer.placement == "host" else self.device
            try:
                self.kernels.append(instantiate(layer.tactic, layer, where))
            except (KeyError, ValueError) as e:
                raise BuildError(f"cannot prepare layer {layer.name!r}: {e}", "rebuild the engine with this tensorforge") from e
        last_use: dict[str, int] = {}
        for index, layer in enumerate(engine.layers):
            for i in layer.inputs:
                if i:
                    last_use[i] = index
        keep = set(engine.output_names)
        self._free_after = [[] for _ in engine.layers]
        for name, index in last_use.items():
            if name not in keep and name not in engine.constants:
                self._free_after[index].append(name)
        self.active_profile = 0
        self._input_shapes: dict[str, tuple[int, ...]] = {}

    # ---- input checks ---------------------------------------------------------------------------
    def check_inputs(self, feed: dict[str, torch.Tensor]) -> None:
        names = self.engine.input_names
        missing = [n for n in names if n not in feed]
        if missing:
            raise InputError(f"missing input {missing[0]!r}", f"the engine's inputs are: {', '.join(names)}")
        extra = [n for n in feed if n not in names]
        if extra:
            raise InputError(f"unknown input {extra[0]!r}", f"the engine's inputs are: {', '.join(names)}")
        for info in self.engine.inputs:
            t = feed[info.name]
            if t.dtype != info.dtype:
                raise InputError(f"input {info.name!r} has dtype {_DTYPE_NAMES.get(t.dtype, t.dtype)}, the engine expects "
                                 f"{_DTYPE_NAMES.get(info.dtype, info.dtype)}", "convert the input to the expected dtype")
        self.active_profile = self._select_profile({n: tuple(feed[n].shape) for n in names})

    def _select_profile(self, shapes: dict[str, tuple[int, ...]]) -> int:
        reasons = []
        for index, profile in enumerate(self.engine.profiles):
            bad = None
            for name, (mn, _, mx) in profile.items():
                s = shapes[name]
                if len(s) != len(mn):
                    bad = f"input {name!r} has rank {len(s)}, the engine expects rank {len(mn)} ({_fmt(mn)})"
                elif any(not (a <= d <= b) for d, a, b in zip(s, mn, mx)):
                    bad = (f"input {name!r} shape {_fmt(s)} is outside profile {index} "
                           f"(min {_fmt(mn)}, max {_fmt(mx)})")
                if bad:
                    break
            if bad is None:
                return index
            reasons.append(bad)
        raise ShapeError(reasons[0], "rebuild with wider --minShapes/--maxShapes, or give a shape inside the profile")

    # ---- execution ------------------------------------------------------------------------------
    def run(self, feed: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Run the engine; `feed` maps input names to torch tensors (any device). Returns name → tensor on the device."""
        self.check_inputs(feed)
        return self.execute({k: v.to(self.device) for k, v in feed.items()})

    def execute(self, feed: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Run without input checks: `feed` already validated and on the device."""
        env: dict[str, torch.Tensor] = dict(self._dev_consts)
        host_env: dict[str, torch.Tensor] = dict(self._host_consts)
        env.update(feed)
        for layer, kernel, free in zip(self.engine.layers, self.kernels, self._free_after):
            if layer.placement == "host":
                ins = [None if not i else host_env[i] if i in host_env else env[i] for i in layer.inputs]
                outs = kernel(ins)
                for name, t in zip(layer.outputs, outs):
                    host_env[name] = t
            else:
                ins = [None if not i else env[i] if i in env else self._to_device(i, host_env, env)
                       for i in layer.inputs]
                outs = kernel(ins)
                for name, t in zip(layer.outputs, outs):
                    env[name] = t
            for name in free:
                env.pop(name, None)
                host_env.pop(name, None)
        return {n: env[n] if n in env else self._to_device(n, host_env, env) for n in self.engine.output_names}

    def _to_device(self, name, host_env, env):
        t = host_env[name].to(self.device)
        env[name] = t
        return t
