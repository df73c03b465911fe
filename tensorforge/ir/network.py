"""Network: inputs, outputs, constants (weights) and a topologically ordered list of layers.

Tensors are referred to by name everywhere; `tensors` maps every name to its TensorInfo.
A name is exactly one of: a network input, a constant, or the output of one layer.
"""

from collections import defaultdict

import torch

from .layer import Layer
from .tensor import Shape, TensorInfo


class Network:
    def __init__(self, name: str = "network"):
        self.name = name
        self.inputs: list[str] = []
        self.outputs: list[str] = []
        self.tensors: dict[str, TensorInfo] = {}
        self.constants: dict[str, torch.Tensor] = {}
        self.layers: list[Layer] = []
        self._names: set[str] = set()

    # ---- construction -------------------------------------------------------------------------
    def add_input(self, name: str, dtype: torch.dtype, shape: Shape | None) -> TensorInfo:
        info = TensorInfo(name, dtype, tuple(shape) if shape is not None else None)
        self.tensors[name] = info
        self.inputs.append(name)
        return info

    def add_constant(self, name: str, value: torch.Tensor) -> str:
        value = value.detach()
        self.constants[name] = value
        self.tensors[name] = TensorInfo(name, value.dtype, tuple(value.shape))
        return name

    def add_layer(self, op: str, inputs: list[str], outputs: list[str] | int = 1, attrs: dict | None = None,
                  name: str | None = None, origin: list[str] | None = None) -> Layer:
        """Append a layer; `outputs` may be a count, in which case fresh names are made from the layer name."""
        name = self.unique_name(name or op)
        if isinstance(outputs, int):
            outputs = [self.unique_name(f"{name}:{i}") for i in range(outputs)]
        layer = Layer(name, op, list(inputs), list(outputs), dict(attrs or {}), list(origin or [name]))
        for o in layer.outputs:
            self.tensors.setdefault(o, TensorInfo(o))
        self.layers.append(layer)
        return layer

    def mark_output(self, name: str) -> None:
        if name not in self.outputs:
            self.outputs.append(name)

    def unique_name(self, base: str) -> str:
        name, i = base, 1
        while name in self._names or name in self.tensors:
            name, i = f"{base}_{i}", i + 1
        self._names.add(name)
        return name

    # ---- queries ------------------------------------------------------------------------------
    def producers(self) -> dict[str, Layer]:
        return {o: layer for layer in self.layers for o in layer.outputs}

    def consumers(self) -> dict[str, list[Layer]]:
        users: dict[str, list[Layer]] = defaultdict(list)
        for layer in self.layers:
            for i in layer.inputs:
                if i:
                    users[i].append(layer)
        return users

    def info(self, name: str) -> TensorInfo:
        return self.tensors[name]

    def copy(self) -> "Network":
        """A structural copy: new layer/info objects; constant tensors are shared (never mutated in place)."""
        net = Network(self.name)
        net.inputs, net.outputs = list(self.inputs), list(self.outputs)
        net.tensors = {k: TensorInfo(v.name, v.dtype, v.shape) for k, v in self.tensors.items()}
        net.constants = dict(self.constants)
        net.layers = [layer.copy() for layer in self.layers]
        net._names = set(self._names)
        return net

    def prune_tensors(self) -> None:
        """Drop infos and constants that no layer or network output refers to any more."""
        used = set(self.inputs) | set(self.outputs)
        for layer in self.layers:
            used.update(i for i in layer.inputs if i)
            used.update(layer.outputs)
        self.tensors = {k: v for k, v in self.tensors.items() if k in used}
        self.constants = {k: v for k, v in self.constants.items() if k in used}

    def __repr__(self) -> str:
        return (f"Network({self.name!r}, {len(self.inputs)} inputs, {len(self.outputs)} outputs, "
                f"{len(self.layers)} layers, {len(self.constants)} constants)")
