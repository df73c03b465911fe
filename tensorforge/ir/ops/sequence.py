"""Sequence and optional ops: values are util.values.TensorSequence / OptionalValue at run time.

SequenceEmpty/Construct/Insert/Erase/At/Length, SplitToSequence, ConcatFromSequence, and
Optional/OptionalHasElement/OptionalGetElement. At build time a sequence or optional is a placeholder
(ir/dynamic.py) that carries only its element type, so every op here has an `infer=`; the references run
at run time (sequences hold a handful of tensors, so these ops move pointers, not data — except
ConcatFromSequence and SplitToSequence, which read and write every element once).
"""

import torch

from ...util.values import OptionalValue, TensorSequence
from .. import dynamic
from ..dtypes import dtype_from_name
from ..opspec import op


def _dtype(t):
    """Element type of a value or placeholder, None when unknown."""
    info = dynamic.placeholder_info(t)
    return None if info is not None and not info.dtype_known else t.dtype


def _as_seq(s) -> TensorSequence:
    if isinstance(s, OptionalValue):
        s = s.value
    if not isinstance(s, TensorSequence):
        raise TypeError(f"expected a sequence, got {type(s).__name__}")
    return s


def _position(pos, n: int, default: int, upper: int) -> int:
    p = default if pos is None else int(pos.reshape(-1)[0].item())
    if p < 0:
        p += n
    if not 0 <= p <= upper:
        raise IndexError(f"sequence position {p} is out of range for a sequence of {n}")
    return p


def _seq_infer(dtype_of):
    return lambda *ins, **attrs: dynamic.sequence_of(dtype_of(*ins, **attrs))


@op("SequenceEmpty", attrs={"dtype": "float32"}, infer=lambda dtype="float32": dynamic.sequence_of(dtype_from_name(dtype)))
def sequence_empty(dtype="float32"):
    return TensorSequence([], dtype_from_name(dtype))


@op("SequenceConstruct", infer=_seq_infer(lambda *xs: _dtype(xs[0])))
def sequence_construct(*xs):
    return TensorSequence(xs, xs[0].dtype)


@op("SequenceInsert", infer=_seq_infer(lambda s, t, pos=None: _dtype(t)))
def sequence_insert(seq, tensor, position=None):
    seq = _as_seq(seq)
    items = list(seq.tensors)
    items.insert(_position(position, len(items), len(items), len(items)), tensor)
    return TensorSequence(items, seq.dtype)


@op("SequenceErase", infer=_seq_infer(lambda s, pos=None: _dtype(s)))
def sequence_erase(seq, position=None):
    seq = _as_seq(seq)
    items = list(seq.tensors)
    del items[_position(position, len(items), len(items) - 1, len(items) - 1)]
    return TensorSequence(items, seq.dtype)


@op("SequenceAt", infer=lambda s, pos: dynamic.unknown(_dtype(s)))
def sequence_at(seq, position):
    seq = _as_seq(seq)
    return seq.tensors[_position(position, len(seq), 0, len(seq) - 1)]


@op("SequenceLength", infer=lambda s: dynamic.data_dependent((), torch.int64))
def sequence_length(seq):
    seq = _as_seq(seq)
    return torch.tensor(len(seq), dtype=torch.int64, device=seq.device)


@op("SplitToSequence", attrs={"axis": 0, "keepdims": 1}, infer=_seq_infer(lambda x, split=None, **a: _dtype(x)))
def split_to_sequence(x, split=None, axis=0, keepdims=1):
    """split absent: pieces of 1 along axis (squeezed unless keepdims); scalar k: pieces of k (the last may
    be shorter); 1-D: those lengths."""
    axis = axis % x.dim()
    if split is None:
        parts = torch.split(x, 1, dim=axis)
        if not keepdims:
            parts = [p.squeeze(axis) for p in parts]
    elif split.dim() == 0:
        parts = torch.split(x, int(split.item()), dim=axis)
    else:
        parts = torch.split(x, [int(v) for v in split.tolist()], dim=axis)
    return TensorSequence(parts, x.dtype)


@op("ConcatFromSequence", attrs={"axis": 0, "new_axis": 0}, infer=lambda s, **a: dynamic.unknown(_dtype(s)))
def concat_from_sequence(seq, axis=0, new_axis=0):
    seq = _as_seq(seq)
    return torch.stack(seq.tensors, dim=axis) if new_axis else torch.cat(seq.tensors, dim=axis)


# ---- optionals ----------------------------------------------------------------------------------------
@op("Optional", attrs={"dtype": "float32", "of_sequence": 0},
    infer=lambda x=None, **a: dynamic.optional_of(_dtype(x) if x is not None else dtype_from_name(a["dtype"])))
def optional(x=None, dtype="float32", of_sequence=0):
    """Wrap x, or make an empty optional of the given element type."""
    if x is None:
        return OptionalValue(None, dtype_from_name(dtype), bool(of_sequence))
    return OptionalValue(x, x.dtype)


@op("OptionalHasElement", infer=lambda x=None: dynamic.data_dependent((), torch.bool))
def optional_has_element(x=None):
    present = x is not None and not (isinstance(x, OptionalValue) and x.value is None)
    return torch.tensor(present, device=x.device if x is not None else None)


@op("OptionalGetElement", infer=lambda x: dynamic.unknown(_dtype(x)))
def optional_get_element(x):
    if isinstance(x, OptionalValue):
        if x.value is None:
            raise ValueError("OptionalGetElement of an empty optional")
        return x.value
    return x
