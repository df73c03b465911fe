"""Placeholders for what shape inference cannot know: data-dependent shapes, values fed at run time, sequences.

The builder infers shapes by running references on meta tensors (`interpret.py`). Some outputs have no
build-time shape: NonZero/Unique/NonMaxSuppression counts depend on data; Reshape/Expand/Tile/... read a
shape that is a network input, known only at run time; a sequence has no tensor shape at all. Such an
output is a *placeholder*: a meta tensor tagged with a `Placeholder` record,

    kind        "tensor" | "sequence" | "optional"
    rank_known  the rank (and so `t.dim()`) is right; every dimension is still unknown (-1)
    dtype_known `t.dtype` is right

and the builder records its dims as -1 (or rank None). The runtime needs nothing: it runs references
eagerly, so real shapes appear when the data does. A placeholder is never folded to a constant and never
placed on the host. Ops make one with `data_dependent(...)`/`sequence_of(...)` in their OpSpec `infer=`;
`propagate` makes one when a reference asks for a value it cannot have (`ValueNeeded`, raised by
`value_guard` when a meta tensor's data is read) and for every output of a layer that reads a placeholder.
"""

from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

_ATTR = "_tfg_placeholder"


@dataclass(frozen=True)
class Placeholder:
    kind: str = "tensor"
    rank_known: bool = True
    dtype_known: bool = True


class ValueNeeded(Exception):
    """A reference read the data of a meta tensor (a value only known at run time)."""


def tag(t: torch.Tensor, info: Placeholder) -> torch.Tensor:
    setattr(t, _ATTR, info)
    return t


def placeholder_info(t) -> Placeholder | None:
    """The placeholder record of `t`, or None for an ordinary tensor (meta with a true shape, or real)."""
    return getattr(t, _ATTR, None) if isinstance(t, torch.Tensor) else None


def data_dependent(shape, dtype: torch.dtype) -> torch.Tensor:
    """A tensor output of known rank and dtype whose dims are only known at run time; `shape` is any
    placeholder size of the right rank (e.g. the upper bound)."""
    return tag(torch.empty(tuple(int(d) for d in shape), dtype=dtype, device="meta"), Placeholder())


def unknown(dtype: torch.dtype | None = None, kind: str = "tensor") -> torch.Tensor:
    """An output of unknown rank (and, without `dtype`, unknown element type)."""
    t = torch.empty((), dtype=dtype or torch.float32, device="meta")
    return tag(t, Placeholder(kind, rank_known=False, dtype_known=dtype is not None))


def sequence_of(dtype: torch.dtype | None) -> torch.Tensor:
    """A sequence value at build time: its element type (when known) and nothing else."""
    return unknown(dtype, "sequence")


def optional_of(dtype: torch.dtype | None, inner: str = "tensor") -> torch.Tensor:
    return unknown(dtype, "optional" if inner == "tensor" else f"optional_{inner}")


def like(t: torch.Tensor) -> torch.Tensor:
    """A fresh placeholder with `t`'s rank and dtype (and `t`'s own tag when it is one)."""
    info = placeholder_info(t) or Placeholder()
    return tag(torch.empty(t.shape, dtype=t.dtype, device="meta"), info)


# ---- reading values of meta tensors --------------------------------------------------------------
_VALUE_READS = {"tolist", "item", "numpy", "__int__", "__float__", "__bool__", "__index__", "__array__",
                "__complex__", "cpu"}


def _has_meta(args) -> bool:
    for a in args:
        if isinstance(a, torch.Tensor) and a.device.type == "meta":
            return True
        if isinstance(a, (list, tuple)) and _has_meta(a):
            return True
    return False


class value_guard(TorchFunctionMode):
    """While active, reading the data of a meta tensor raises `ValueNeeded` (instead of torch's various
    errors), and so does an op torch cannot run on meta because its output shape depends on data
    (nonzero, unique, boolean masks: NotImplementedError on meta)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in _VALUE_READS and _has_meta(args):
            raise ValueNeeded(f"{name}() of a tensor whose value is only known at run time")
        try:
            return func(*args, **kwargs)
        except NotImplementedError as e:
            if _has_meta(args) or _has_meta(kwargs.values()):
                raise ValueNeeded(f"{name}: output shape depends on data ({str(e).splitlines()[0][:80]})") from e
            raise
