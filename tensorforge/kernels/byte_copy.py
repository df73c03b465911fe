"""Copies of 1-byte tensors (int8/uint8/fp8 codes) made 4 bytes at a time.

Once a QuantizeLinear moves above a Transpose (passes/rules/qdq_hoist.py), the transposed tensor holds 1-byte codes,
and the next reshape (a GEMM's (M, K) rows, ViT's head merge) must copy it. torch's strided copy does one index
computation per element, so a 1-byte copy costs as many steps as a 2-byte one while moving half the bytes (ViT-B/16
INT8 at batch 32 on an H100: 24 such copies, 280 µs of 3.26 ms). Where the last axis is contiguous and a multiple
of 4 bytes long, every row is a run of 4-byte words: the copy runs on the int32 view of x, a quarter of the
elements, the same bytes. Same traffic (read + write |x| bytes), exact (bytes are moved, never converted).

Entry points: `dense_rows(x)` — x (…, K) as a contiguous (M, K) matrix; `contiguous_bytes(x)`; the tactic
`reshape.word_copy` (a Reshape whose input must be copied).
"""

import torch

from ..ir import get_spec
from .registry import tactic

WORD = 4


def _word_view(x: torch.Tensor) -> torch.Tensor | None:
    """x (1-byte elements) as int32 words along its last axis, or None where that view does not exist."""
    if x.element_size() != 1 or x.dim() == 0 or x.stride(-1) != 1 or x.shape[-1] % WORD:
        return None
    if x.storage_offset() % WORD or any(s % WORD for s, n in zip(x.stride()[:-1], x.shape[:-1]) if n > 1):
        return None
    return x.view(torch.int32)


def contiguous_bytes(x: torch.Tensor) -> torch.Tensor:
    """x made contiguous; a 1-byte x with word-aligned rows is copied as int32 words (a quarter of the elements)."""
    if x.is_contiguous():
        return x
    words = _word_view(x)
    return x.contiguous() if words is None else words.contiguous().view(x.dtype)


def dense_rows(x: torch.Tensor) -> torch.Tensor:
    """x (…, K) as an (M, K) matrix with contiguous rows: a view where one exists, else one copy (by words for
    1-byte codes)."""
    k = x.shape[-1]
    try:
        return x.view(-1, k)
    except RuntimeError:                     # the leading dims do not merge: copy
        return contiguous_bytes(x).view(-1, k)


@tactic("Reshape", name="word_copy", priority=-90)
class ReshapeWordCopy:
    """Reshape: the reference's result, except that an input the new shape cannot view is first made contiguous by
    `contiguous_bytes` (the reference's own copy would move 1-byte codes one index computation each)."""

    @staticmethod
    def supports(layer, device):
        return None if torch.device(device).type == "cuda" else "a GPU copy path (CPU reshapes keep torch's)"

    @staticmethod
    def build(layer, cfg, device):
        reshape = get_spec("Reshape").reference

        def run(inputs):
            x = inputs[0]
            if x.element_size() != 1:
                return [reshape(x, *inputs[1:], **layer.attrs)]
            probe = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
            shape = reshape(probe, *inputs[1:], **layer.attrs).shape      # the target shape, nothing copied
            try:
                return [x.view(shape)]
            except RuntimeError:             # not a view of x: one copy, by words
                return [contiguous_bytes(x).view(shape)]
        return run
