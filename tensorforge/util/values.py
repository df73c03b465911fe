"""Run-time values that are not tensors: ONNX sequences and optionals.

A `TensorSequence` is an ordered list of tensors of one element type; an `OptionalValue` holds a tensor,
a sequence, or nothing. Both pass through the runtime like tensors: they carry the element `dtype`,
a 0-d `shape` (the network declares a sequence or optional input as a 0-d tensor of its element type,
see parser/onnx_model.py) and `.to(device)`. They live in util so that the IR's references, the runtime
and the ONNX backend adapter can all build and read them.
"""

from __future__ import annotations

import torch

_EMPTY = torch.Size([])


class TensorSequence:
    """ONNX `seq(tensor(T))`: immutable by convention; sequence ops return new sequences."""

    __slots__ = ("tensors", "dtype")
    shape = _EMPTY

    def __init__(self, tensors=(), dtype: torch.dtype | None = None):
        self.tensors = list(tensors)
        self.dtype = dtype if dtype is not None else (self.tensors[0].dtype if self.tensors else torch.float32)

    @property
    def device(self) -> torch.device:
        return self.tensors[0].device if self.tensors else torch.device("cpu")

    def to(self, device) -> "TensorSequence":
        return TensorSequence([t.to(device) for t in self.tensors], self.dtype)

    def clone(self) -> "TensorSequence":
        return TensorSequence([t.clone() for t in self.tensors], self.dtype)

    def __len__(self) -> int:
        return len(self.tensors)

    def __iter__(self):
        return iter(self.tensors)

    def __getitem__(self, index):
        return self.tensors[index]

    def __repr__(self) -> str:
        return f"TensorSequence({len(self.tensors)} x {self.dtype})"


class OptionalValue:
    """ONNX `optional(...)`: `value` is a tensor, a TensorSequence, or None (empty)."""

    __slots__ = ("value", "dtype", "of_sequence")
    shape = _EMPTY

    def __init__(self, value=None, dtype: torch.dtype | None = None, of_sequence: bool = False):
        self.value = value
        self.of_sequence = of_sequence or isinstance(value, TensorSequence)
        self.dtype = dtype if dtype is not None else (value.dtype if value is not None else torch.float32)

    @property
    def device(self) -> torch.device:
        return self.value.device if self.value is not None else torch.device("cpu")

    def to(self, device) -> "OptionalValue":
        return OptionalValue(None if self.value is None else self.value.to(device), self.dtype, self.of_sequence)

    def clone(self) -> "OptionalValue":
        return OptionalValue(None if self.value is None else self.value.clone(), self.dtype, self.of_sequence)

    def __repr__(self) -> str:
        return f"OptionalValue({self.value!r})"
