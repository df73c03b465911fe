"""The fused conv epilogue + pool (kernels/triton_conv_pool.py) under TRITON_INTERPRET=1 on tiny CPU tensors,
against the FusedConvPool reference: both layouts, residual before/after, Y stored or absent, float16, every tile
config and the 'separate' configs; and the CPU torch tactic."""

import pytest
import torch

from tensorforge.ir import Layer, get_spec
from tensorforge.kernels.torch_fused import TorchFusedConvPool
from tensorforge.kernels.triton_conv_pool import CONFIGS, TILES, FusedConvPoolTriton, conv_bias_act_pool_

CPU = torch.device("cpu")
CL = torch.channels_last


def reference(x, w, b=None, r=None, **attrs):
    return get_spec("FusedConvPool").reference(x, w, b, r, **attrs)


def raw_conv(x, w, **attrs):
    return get_spec("Conv").reference(x, w, None, **attrs)


@pytest.mark.parametrize("tile", TILES)
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("res_first", [None, 0, 1])
def test_launcher_matches_reference(tile, channels_last, res_first):
    torch.manual_seed(0)
    x, w, b = torch.randn(2, 3, 6, 5), torch.randn(5, 3, 3, 3), torch.randn(5)
    r = torch.randn(2, 5, 4, 3) if res_first is not None else None
    want_y, want_p = reference(x, w, b, r, activation="Silu", residual_first=res_first or 0)
    y = raw_conv(x, w)
    y = y.contiguous(memory_format=CL) if channels_last else y.contiguous()
    got_y, got_p = conv_bias_act_pool_(y, b, r, "Silu", residual_first=res_first or 0, cfg=tile)
    assert got_y.data_ptr() == y.data_ptr() and got_p.shape == (2, 5, 1, 1)
    torch.testing.assert_close(got_y, want_y, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got_p, want_p, rtol=1e-5, atol=1e-5)


def test_absent_y_is_not_written_and_half_mean_is_of_stored_values():
    torch.manual_seed(1)
    y = (torch.randn(1, 70, 3, 3) * 4).half().contiguous(memory_format=CL)      # 70 channels: a partial block
    bias = torch.randn(70)
    before = y.clone()
    none, pooled = conv_bias_act_pool_(y, bias, None, "HardSwish", store_y=False, cfg=TILES[1])
    assert none is None and torch.equal(y, before) and pooled.dtype == torch.float16
    stored, again = conv_bias_act_pool_(y.clone(memory_format=torch.preserve_format), bias, None, "HardSwish")
    assert torch.equal(pooled, again)
    want = stored.float().mean(dim=(2, 3), keepdim=True)         # the mean of the float16 values Y holds
    torch.testing.assert_close(pooled.float(), want, rtol=1e-3, atol=1e-3)


def _layer(outputs, **attrs):
    base = {"auto_pad": "NOTSET", "dilations": [1, 1], "group": 1, "kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
            "strides": [2, 2], "activation": "Relu", "alpha": 0.0, "beta": 0.0, "residual_first": 0}
    return Layer("fcp", "FusedConvPool", ["x", "w", "b"], outputs, {**base, **attrs})


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("store", [True, False])
def test_tactic_every_config(cfg, store):
    torch.manual_seed(2)
    x, w, b = torch.randn(1, 4, 9, 7), torch.randn(6, 4, 3, 3), torch.randn(6)
    layer = _layer(["y" if store else "", "p"])
    want_y, want_p = reference(x, w, b, **{k: v for k, v in layer.attrs.items()})
    got_y, got_p = FusedConvPoolTriton.build(layer, cfg, CPU)([x, w, b])
    torch.testing.assert_close(got_p, want_p, rtol=1e-5, atol=1e-5)
    if store:
        torch.testing.assert_close(got_y, want_y, rtol=1e-5, atol=1e-5)
    else:
        assert got_y is None


def test_torch_tactic_and_supports_reasons():
    torch.manual_seed(3)
    x, w, b = torch.randn(2, 4, 8, 8), torch.randn(6, 4, 3, 3), torch.randn(6)
    layer = _layer(["", "p"])
    got_y, got_p = TorchFusedConvPool.build(layer, {}, CPU)([x, w, b])
    assert got_y is None
    torch.testing.assert_close(got_p, reference(x, w, b, **layer.attrs)[1], rtol=1e-5, atol=1e-5)
    assert "CUDA" in FusedConvPoolTriton.supports(layer, CPU)
    assert "2-D" in FusedConvPoolTriton.supports(_layer(["y", "p"], kernel_shape=[3]), torch.device("cuda"))
