"""TensorInfo: a named edge of the network with its element type and shape.

A shape is a tuple whose entries are ints (static), strings (a named symbolic dimension) or -1
(dynamic, unnamed); `shape=None` means the rank is unknown.
"""

from dataclasses import dataclass

import torch

from .dtypes import dtype_name

Dim = int | str
Shape = tuple[Dim, ...]


@dataclass
class TensorInfo:
    name: str
    dtype: torch.dtype | None = None
    shape: Shape | None = None

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) and d >= 0 for d in self.shape)

    def describe(self) -> str:
        dt = dtype_name(self.dtype) if self.dtype is not None else "?"
        if self.shape is None:
            return f"{dt}[?]"
        return f"{dt}[{','.join(str(d) for d in self.shape)}]"
