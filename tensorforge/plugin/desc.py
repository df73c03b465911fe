"""TensorDesc: what a plugin's descriptor sees of a tensor, and what it returns for each output.

A descriptor is plain Python over `TensorDesc`s: `x.like()`, `x.new((x.shape[0], k, 4), torch.int32)`.
Dimensions are ints when the builder infers shapes (it calls the descriptor once per profile point:
min, opt and max) and `torch.SymInt`s when PyTorch traces the op (`torch_op` under torch.export), so
arithmetic such as `x.shape[1] * 2` or `x.shape[2] // stride` works unchanged on symbolic dimensions.
`value` holds the contents of an input known when the descriptor runs (a constant at build time, a CPU tensor
at run time), else None: at run time on a GPU it is None, so use it only to validate, never for output shapes.
"""

from typing import Any, Sequence

import torch


class TensorDesc:
    """Shape and dtype of one plugin input or output (no data)."""

    __slots__ = ("shape", "dtype", "value")

    def __init__(self, shape: Sequence[Any], dtype: torch.dtype, value: torch.Tensor | None = None):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.value = value

    @classmethod
    def of(cls, t: torch.Tensor) -> "TensorDesc":
        """Describe a (meta, fake or real) tensor; real CPU tensors keep their value."""
        known = t if t.device.type == "cpu" and not _is_fake(t) else None
        return cls(tuple(t.shape), t.dtype, known)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def like(self, shape: Sequence[Any] | None = None, dtype: torch.dtype | None = None) -> "TensorDesc":
        """An output of this tensor's shape and dtype, either of which may be replaced."""
        return TensorDesc(self.shape if shape is None else shape, self.dtype if dtype is None else dtype)

    def new(self, shape: Sequence[Any], dtype: torch.dtype | None = None) -> "TensorDesc":
        """An output of a new shape (dtype defaults to this tensor's)."""
        return TensorDesc(shape, self.dtype if dtype is None else dtype)

    def __repr__(self) -> str:
        dt = str(self.dtype).replace("torch.", "")
        return f"TensorDesc({dt}[{','.join(str(d) for d in self.shape)}])"


def _is_fake(t: torch.Tensor) -> bool:
    return type(t).__name__ == "FakeTensor"
