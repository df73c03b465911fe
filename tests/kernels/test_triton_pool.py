"""GlobalAveragePool's Triton tactic (kernels/triton_pool.py) under TRITON_INTERPRET=1 on tiny CPU tensors, against
the op's reference: NCHW and channels-last inputs, odd sizes, every config, float16, other ranks, odd strides."""

import pytest
import torch

from tensorforge.ir import Layer, get_spec
from tensorforge.kernels import candidates
from tensorforge.kernels.triton_pool import CONFIGS, TritonGlobalAveragePool, global_avg_pool

CPU = torch.device("cpu")
SMALL = {"BLOCK_C": 2, "BLOCK_HW": 4, "warps": 1}     # several channel blocks and HW chunks on tiny shapes


def ref(x):
    return get_spec("GlobalAveragePool").reference(x)


@pytest.mark.parametrize("shape", [(2, 3, 5, 1), (1, 5, 3, 3), (2, 3, 7, 6)])   # C = 3 and H·W = 5 among them
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("cfg", [SMALL] + CONFIGS)
def test_matches_reference(shape, channels_last, cfg):
    x = torch.randn(*shape) * 2 + 1
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    got = global_avg_pool(x, cfg)
    want = ref(x)
    assert got.shape == want.shape and got.dtype == want.dtype and got.is_contiguous()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("channels_last", [False, True])
def test_half_accumulates_in_float32(channels_last):
    x = (torch.randn(2, 3, 9, 7) + 100).half()         # a float16 running sum would lose the small parts
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    got = global_avg_pool(x, SMALL)
    assert got.dtype == torch.float16
    torch.testing.assert_close(got, ref(x.float()).half(), rtol=0, atol=0.0625)   # within 1 ulp at 100


@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 5), (1, 2, 3, 2, 2)])
def test_other_ranks(shape):
    x = torch.randn(*shape)
    got = global_avg_pool(x, SMALL)
    torch.testing.assert_close(got, ref(x), rtol=1e-5, atol=1e-6)


def test_strided_views():
    base = torch.randn(2, 6, 5, 4)
    sliced = base[:, 1:4]                               # channel slice: spatial dims still flatten, no copy
    torch.testing.assert_close(global_avg_pool(sliced, SMALL), ref(sliced), rtol=1e-5, atol=1e-6)
    swapped = base.transpose(2, 3)                      # H and W do not flatten: copied to NCHW first
    torch.testing.assert_close(global_avg_pool(swapped, SMALL), ref(swapped), rtol=1e-5, atol=1e-6)


def test_tactic_build_and_supports():
    lay = Layer("gap", "GlobalAveragePool", ["x"], ["y"], {})
    x = torch.randn(1, 3, 5, 5).contiguous(memory_format=torch.channels_last)
    got = TritonGlobalAveragePool.build(lay, CONFIGS[1], CPU)([x])[0]
    torch.testing.assert_close(got, ref(x), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="float"):
        TritonGlobalAveragePool.build(lay, CONFIGS[0], CPU)([torch.ones(1, 2, 2, 2, dtype=torch.float64)])
    assert TritonGlobalAveragePool.supports(lay, torch.device("cuda")) is None
    found, reasons = candidates(lay, CPU)
    assert "triton_mean" not in [t.name for t, _ in found] and "CUDA" in reasons["triton_mean"]
