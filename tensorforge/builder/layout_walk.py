"""The opt-point tensors that tactic timing runs candidates on (builder/tactics.py), as the built engine will see them.

    walk = LayoutWalk(net, opt_point, device, env)
    walk.materialize(layer)       device tensors: known values copied once, activations random
    walk.set_strides(layer, s)    the strides the chosen kernel emitted become its consumers' timing inputs

Split out of tactics.py (which chooses; this only tracks layouts). Memory: one propagated meta tensor per network
tensor, plus the known values copied to the device once.
"""

import torch

from ..ir import Layer, Network
from ..ir.interpret import propagate, run_reference

FLOAT8 = tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
               if hasattr(torch, n))


def random_fill(x: torch.Tensor) -> torch.Tensor:
    """Timing inputs: N(0, 1) for floats (float8 types have no normal_ kernel: drawn in fp32, then cast),
    zeros for integers and bools (index-safe)."""
    if x.dtype in FLOAT8:
        return x.copy_(torch.randn(x.shape, device=x.device).to(x.dtype))
    return x.normal_() if x.is_floating_point() else x.zero_()


class LayoutWalk:
    """Tensors at the opt point as the built engine will see them: values where known (shape arithmetic,
    constants), else meta tensors carrying the shape, dtype and strides that the chosen producers emit
    (a channels-last convolution hands its consumers NHWC-strided tensors, and they are timed on those)."""

    def __init__(self, net: Network, opt_point: dict | None, device: torch.device, env: dict | None = None):
        if env is None:
            if opt_point is None:
                opt_point = {n: net.tensors[n].shape for n in net.inputs}
            env = propagate(net, opt_point)
        self.env = dict(env)          # strides are rewritten below; the caller's tensors stay as they were
        self.constants = set(net.constants)
        self.device = device
        self._on_device: dict[str, torch.Tensor] = {}

    def describe_inputs(self, layer: Layer) -> list[dict | None]:
        out = []
        for name in layer.inputs:
            t = self.env.get(name) if name else None
            if t is None:
                out.append(None)
                continue
            d = {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""), "stride": list(t.stride()),
                 "const": name in self.constants}
            if t.device.type != "meta" and name not in self.constants and t.numel() <= 64:
                d["value"] = t.flatten().tolist()        # shape arithmetic decides what the kernel does
            out.append(d)
        return out

    def materialize(self, layer: Layer) -> list[torch.Tensor | None]:
        """Device tensors for timing: known values copied, activations random (ints and bools zero: valid indices)."""
        return [self.tensor(name) if name and self.env.get(name) is not None else None for name in layer.inputs]

    def tensor(self, name: str, host: bool = False) -> torch.Tensor:
        """One network tensor on the device, for a layer's timing (`materialize`) or a whole-network run
        (context_timing.py): a known value copied once (or left on the host with `host`: the op reads it as a
        value), an activation random with the strides its producer emits."""
        t = self.env[name]
        if t.device.type != "meta":
            if host:
                return t
            if name not in self._on_device:
                self._on_device[name] = t.to(self.device)
            return self._on_device[name]
        return random_fill(torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=self.device))

    def set_strides(self, layer: Layer, strides: list | None) -> None:
        if not strides:
            return self.untimed(layer)
        for name, st in zip(layer.outputs, strides):
            t = self.env.get(name) if name else None
            if t is not None and t.device.type == "meta" and st is not None and len(st) == t.dim():
                self.env[name] = torch.empty_strided(t.shape, st, dtype=t.dtype, device="meta")

    def untimed(self, layer: Layer) -> None:
        """The reference on meta tensors gives the strides a torch kernel would produce from these inputs."""
        if all(self.env.get(o) is None or self.env[o].device.type != "meta" for o in layer.outputs if o):
            return
        ins = [self.env.get(i) if i else None for i in layer.inputs]
        if not any(t is not None and t.device.type == "meta" and not t.is_contiguous() for t in ins):
            return          # contiguous in → the strides from shape inference already hold
        try:
            outs = run_reference(layer, ins)
        except Exception:  # noqa: BLE001 - shape inference ran this layer already; keep its (contiguous) result
            return
        for name, t in zip(layer.outputs, outs):
            if name and isinstance(t, torch.Tensor) and t.device.type == "meta":
                self.env[name] = t
