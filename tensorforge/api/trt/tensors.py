"""Weights, Dims and ITensor: the values a TensorRT-style network is built from.

`Weights` holds host data for a layer (numpy, torch, a list or a number; empty `Weights()` means absent).
`Dims`/`Permutation` are tuples. `ITensor` is a handle on one named tensor of a NetworkDefinition: its
`shape` and `dtype` come from the network's shape inference (dims that vary with the input's dynamic
dimensions read -1), and setting `name` renames the tensor everywhere in the network.
"""

import numpy as np
import torch

from ...util.errors import UsageError
from .enums import DataType
from .strict import TrtObject


class Dims(tuple):
    """A shape (trt.Dims): a tuple of ints, -1 for a dynamic dimension."""

    def __new__(cls, *dims):
        """Dims((1, 3, 224, 224)) or Dims(1, 3, 224, 224) (TensorRT's Dims2(h, w), Dims4(n, c, h, w), ...)."""
        shape = dims[0] if len(dims) == 1 and not isinstance(dims[0], (int, np.integer)) else dims
        return super().__new__(cls, (int(d) for d in shape))

    @property
    def nbDims(self) -> int:  # noqa: N802 - TensorRT's name
        return len(self)


def _fixed(rank: int, name: str):
    class Fixed(Dims):
        def __new__(cls, *dims):
            d = Dims.__new__(cls, *dims)
            if len(d) != rank:
                raise UsageError(f"trt.{name} takes {rank} dimensions, got {len(d)}", f"write trt.{name}"
                                 f"({', '.join('d' + str(i) for i in range(rank))})")
            return d
    Fixed.__name__ = Fixed.__qualname__ = name
    return Fixed


Dims2, Dims3, Dims4, DimsHW = _fixed(2, "Dims2"), _fixed(3, "Dims3"), _fixed(4, "Dims4"), _fixed(2, "DimsHW")


class Permutation(tuple):
    """An axis order (trt.Permutation)."""

    def __new__(cls, order=()):
        return super().__new__(cls, (int(d) for d in order))


class Weights:
    """Host data handed to a layer (trt.Weights). `Weights()` is empty: an absent bias, for instance."""

    def __init__(self, a=None):
        if a is None:
            self.tensor = None
        elif isinstance(a, Weights):
            self.tensor = a.tensor
        elif isinstance(a, torch.Tensor):
            self.tensor = a.detach().cpu().clone()
        elif isinstance(a, np.ndarray):
            self.tensor = torch.from_numpy(np.array(a, copy=True))
        elif isinstance(a, (list, tuple, int, float, np.generic)):
            self.tensor = torch.from_numpy(np.array(a, dtype=np.float32 if not isinstance(a, np.generic) else None))
        elif isinstance(a, DataType):
            raise UsageError("Weights(DataType, pointer, count) is not supported",
                             "pass the data itself: a numpy array or torch tensor")
        else:
            raise UsageError(f"cannot make Weights from a {type(a).__name__}", "pass a numpy array or a torch tensor")

    @property
    def size(self) -> int:
        return 0 if self.tensor is None else self.tensor.numel()

    @property
    def nbytes(self) -> int:
        return 0 if self.tensor is None else self.tensor.numel() * self.tensor.element_size()

    @property
    def dtype(self) -> DataType:
        return DataType.FLOAT if self.tensor is None else DataType.from_torch(self.tensor.dtype)

    def numpy(self) -> np.ndarray:
        return np.empty(0, np.float32) if self.tensor is None else self.tensor.numpy()

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"Weights({self.dtype.name}, {self.size} values)"


def as_weights(value, what: str, required: bool = False) -> torch.Tensor | None:
    """Layer weights from Weights/ndarray/tensor/list; None or empty → None (or an error when required)."""
    w = value if isinstance(value, Weights) else Weights(value)
    if w.tensor is None or w.tensor.numel() == 0:
        if required:
            raise UsageError(f"{what} weights are empty", f"pass the {what} as a numpy array")
        return None
    return w.tensor


class ITensor(TrtObject):
    """A tensor of a NetworkDefinition, by name. Create through the network, never directly."""

    def __init__(self, network, name: str):
        self._network, self._name = network, name

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        self._network._rename_tensor(self, str(value))

    @property
    def shape(self) -> Dims:
        info = self._network._info(self._name)
        if info.shape is None:
            raise UsageError(f"the rank of tensor {self._name!r} is not known before the engine runs",
                             "it depends on data; query the execution context after setting input shapes")
        return Dims(d if isinstance(d, int) else -1 for d in info.shape)

    @property
    def dtype(self) -> DataType:
        return DataType.from_torch(self._network._info(self._name).dtype)

    @property
    def is_network_input(self) -> bool:
        return self._name in self._network._net.inputs

    @property
    def is_network_output(self) -> bool:
        return self._name in self._network._net.outputs

    @property
    def is_shape_tensor(self) -> bool:
        return False

    # ---- INT8 dynamic range (symmetric: the builder quantizes with amax = max(|min|, |max|)) ----------------
    def set_dynamic_range(self, min: float, max: float) -> bool:  # noqa: A002 - TensorRT's names
        if not float(min) <= float(max):
            raise UsageError(f"tensor {self._name!r}: dynamic range min {min} > max {max}", "give min <= max")
        self._network._ranges[self._name] = (float(min), float(max))
        return True

    def reset_dynamic_range(self) -> None:
        self._network._ranges.pop(self._name, None)

    @property
    def dynamic_range(self):
        """(min, max) set by set_dynamic_range, else None."""
        return self._network._ranges.get(self._name)

    def __repr__(self) -> str:
        return f"ITensor({self._name!r})"
