"""Typed plugin attributes: the descriptor's annotations say what each attribute is, this module converts.

Supported annotations: `int`, `float`, `str`, `bool`, `list[int]`, `list[float]`, `list[str]`, `torch.Tensor`.
ONNX has no bool attribute, so `bool` accepts the ints 0/1 (TensorRT's convention); `float` accepts ints;
`list[...]` accepts tuples and 1-D tensors. Anything else is a wrong type: `coerce` raises `AttrTypeError`
naming the expected and found type, and the caller turns it into a one-line PluginError.
"""

import typing
from dataclasses import dataclass
from typing import Any

import torch

SCALARS = {int: "int", float: "float", str: "str", bool: "bool"}


class AttrTypeError(TypeError):
    """A value that does not fit an attribute's declared type."""


@dataclass(frozen=True)
class AttrType:
    kind: type             # int, float, str, bool, list or torch.Tensor
    item: type | None = None

    @property
    def name(self) -> str:
        if self.kind is list:
            return f"list[{SCALARS[self.item]}]"
        if self.kind is torch.Tensor:
            return "tensor"
        return SCALARS[self.kind]


def parse_annotation(annotation) -> AttrType | None:
    """AttrType for an annotation, or None when it is not a supported attribute type."""
    if annotation in SCALARS:
        return AttrType(annotation)
    if annotation is torch.Tensor:
        return AttrType(torch.Tensor)
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, typing.Sequence) or str(origin) == "<class 'collections.abc.Sequence'>":
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        if len(args) == 1 and args[0] in SCALARS and args[0] is not bool:
            return AttrType(list, args[0])
    return None


def _found(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"tensor of shape {list(value.shape)}"
    text = repr(value)
    return f"{type(value).__name__} ({text if len(text) <= 40 else text[:37] + '...'})"


def _scalar(value, kind: type, want: str):
    if isinstance(value, torch.Tensor) and value.dim() == 0:
        value = value.item()
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
    elif kind is int:
        if isinstance(value, int):
            return int(value)
    elif kind is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif kind is str:
        if isinstance(value, str):
            return value
    raise AttrTypeError(f"expects {want}, got {_found(value)}")


def coerce(value, t: AttrType) -> Any:
    """Convert `value` (an ONNX-decoded or user-given attribute) to type `t`, or raise AttrTypeError."""
    if t.kind is torch.Tensor:
        if isinstance(value, torch.Tensor):
            return value
        raise AttrTypeError(f"expects tensor, got {_found(value)}")
    if t.kind is list:
        if isinstance(value, torch.Tensor) and value.dim() == 1:
            value = value.tolist()
        if not isinstance(value, (list, tuple)):
            raise AttrTypeError(f"expects {t.name}, got {_found(value)}")
        try:
            return [_scalar(v, t.item, SCALARS[t.item]) for v in value]
        except AttrTypeError:
            raise AttrTypeError(f"expects {t.name}, got {_found(value)}") from None
    return _scalar(value, t.kind, t.name)


def schema_type(t: AttrType) -> str:
    """The torch.library schema type of an attribute (torch_op)."""
    if t.kind is list:
        return {int: "int[]", float: "float[]", str: "str[]"}[t.item]
    if t.kind is torch.Tensor:
        raise AttrTypeError("tensor attributes cannot be torch custom-op arguments")
    return SCALARS[t.kind]
