"""kernels/byte_copy.py: 1-byte codes copied as 4-byte words. Oracle: torch's own reshape/contiguous of the same
tensor, byte for byte; the word path must be the one taken where rows are word-aligned, and refused elsewhere."""

import pytest
import torch

from tensorforge.ir import Layer, get_spec
from tensorforge.kernels.byte_copy import ReshapeWordCopy, _word_view, contiguous_bytes, dense_rows


def _codes(shape, dtype):
    g = torch.Generator().manual_seed(1)
    raw = torch.randint(0, 256, shape, generator=g, dtype=torch.int16).to(torch.uint8)
    return raw.view(dtype)


def _bytes(t):
    return t.contiguous().view(torch.uint8)


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.float8_e4m3fn])
def test_transposed_codes_become_rows_by_words(dtype):
    x = _codes((3, 7, 32), dtype).transpose(0, 1)          # ViT's (S, B, E) view of (B, S, E) codes
    assert _word_view(x) is not None
    rows = dense_rows(x)
    assert rows.shape == (21, 32) and rows.is_contiguous() and rows.dtype == dtype
    assert torch.equal(_bytes(rows), _bytes(x.reshape(-1, 32)))


def test_head_merge_permutation_by_words():
    x = _codes((2, 4, 5, 8), torch.int8).permute(2, 0, 1, 3)   # (N, H, L, D) → (L, N, H, D), as ViT merges heads
    assert torch.equal(contiguous_bytes(x), x.contiguous())


@pytest.mark.parametrize("make", [
    lambda: _codes((3, 7, 30), torch.int8).transpose(0, 1),              # rows of 30 bytes: not whole words
    lambda: _codes((3, 7, 33), torch.int8)[..., 1:].transpose(0, 1),     # rows start 1 byte into a word
    lambda: _codes((3, 8, 32), torch.int8).transpose(1, 2),              # the last axis is strided
])
def test_unaligned_codes_fall_back_to_torchs_copy(make):
    x = make()
    assert _word_view(x) is None
    assert torch.equal(dense_rows(x), x.reshape(-1, x.shape[-1]))


def test_a_viewable_input_is_not_copied():
    x = _codes((4, 6, 16), torch.int8)
    assert dense_rows(x).data_ptr() == x.data_ptr()
    wide = torch.randn(3, 5, 8).transpose(0, 1)               # 4-byte elements: torch's copy as before
    assert torch.equal(dense_rows(wide), wide.reshape(-1, 8))


@pytest.mark.parametrize("shape,target", [((2, 6, 16), [12, 16]), ((2, 6, 16), [-1, 4, 4]), ((2, 6, 16), [0, -1])])
@pytest.mark.parametrize("transposed", [False, True])
def test_reshape_tactic_equals_the_reference(shape, target, transposed):
    x = _codes(shape, torch.int8)
    if transposed:
        x = x.transpose(0, 1)
    layer = Layer("r", "Reshape", ["x", "s"], ["y"], get_spec("Reshape").resolve_attrs({}))
    run = ReshapeWordCopy.build(layer, {}, "cpu")
    s = torch.tensor(target, dtype=torch.int64)
    got = run([x, s])[0]
    want = get_spec("Reshape").reference(x, s, **layer.attrs)
    assert got.shape == want.shape and torch.equal(got, want)
    assert ReshapeWordCopy.supports(layer, "cpu") is not None
