"""Torch tactics of the fused ops (SDPA, layer_norm, addmm + in-place epilogue, conv + in-place epilogue)
against each op's reference, and their selection over the generic reference tactic on CPU."""

import pytest
import torch

from tensorforge.ir import Layer, get_spec
from tensorforge.kernels import candidates, onednn_capi
from tensorforge.kernels.torch_fused import TorchFusedConv, TorchLayerNorm, TorchMatMulEpilogue, TorchSDPA

CPU = torch.device("cpu")


def ref(op, *inputs, **attrs):
    out = get_spec(op).reference(*inputs, **attrs)
    return out[0] if isinstance(out, tuple) else out


def layer(op, n_in, n_out=1, **attrs):
    return Layer("l", op, [f"i{k}" for k in range(n_in)], [f"o{k}" for k in range(n_out)], attrs)


@pytest.mark.parametrize("mask", [None, "additive", "bool"])
def test_sdpa(mask):
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(1, 3, 7, 8), torch.randn(2, 3, 7, 4)   # batch dims broadcast
    m = None
    if mask == "additive":
        m = torch.zeros(2, 1, 1, 7)
        m[1, ..., :2] = -1e4
    elif mask == "bool":
        m = torch.rand(2, 3, 5, 7) > 0.3
        m[..., 0] = True
    inputs = [q, k, v] + ([m] if m is not None else [])
    got = TorchSDPA.build(layer("Attention", len(inputs), scale=0.25), {}, CPU)(inputs)[0]
    torch.testing.assert_close(got, ref("Attention", *inputs, scale=0.25), rtol=1e-5, atol=1e-5)


def test_layer_norm_and_its_reason():
    x, w, b = torch.randn(2, 3, 6), torch.randn(3, 6), torch.randn(3, 6)
    lay = layer("LayerNormalization", 3, axis=-2, epsilon=1e-3, stash_type=1)
    torch.testing.assert_close(TorchLayerNorm.build(lay, {}, CPU)([x, w, b])[0],
                               ref("LayerNormalization", x, w, b, axis=-2, epsilon=1e-3), rtol=1e-6, atol=1e-6)
    assert "Mean/InvStdDev" in TorchLayerNorm.supports(layer("LayerNormalization", 3, 3), CPU)


@pytest.mark.parametrize("attrs", [
    {"activation": "Gelu"}, {"activation": "Relu", "trans_b": 1, "scale": 0.5},
    {"activation": "Clip", "alpha": -1.0, "beta": 1.0, "residual_first": 1},
    {"activation": "HardSwish"}, {"activation": "Silu", "residual_first": 0},
    {"activation": "HardSigmoid", "alpha": 0.2, "beta": 0.5},
])
def test_addmm_epilogue(attrs):
    a = torch.randn(2, 4, 6)
    b = torch.randn(5, 6) if attrs.get("trans_b") else torch.randn(6, 5)
    inputs = [a, b, torch.randn(5), torch.randn(2, 4, 5)]
    got = TorchMatMulEpilogue.build(layer("MatMulEpilogue", 4, **attrs), {}, CPU)(inputs)[0]
    torch.testing.assert_close(got, ref("MatMulEpilogue", *inputs, **attrs), rtol=1e-5, atol=1e-5)


def test_batched_matmul_epilogue_without_bias():
    a, b = torch.randn(3, 4, 6), torch.randn(3, 6, 5)
    got = TorchMatMulEpilogue.build(layer("MatMulEpilogue", 2, activation="Tanh"), {}, CPU)([a, b])[0]
    torch.testing.assert_close(got, torch.tanh(a @ b), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("residual_first,act", [(1, "Relu"), (0, "Sigmoid"), (1, "LeakyRelu")])
def test_conv_epilogue(residual_first, act):
    x, w, b, r = torch.randn(1, 3, 6, 6), torch.randn(4, 3, 3, 3), torch.randn(4), torch.randn(1, 4, 6, 6)
    attrs = {"pads": [1, 1, 1, 1], "kernel_shape": [3, 3], "activation": act, "alpha": 0.1,
             "residual_first": residual_first}
    got = TorchFusedConv.build(layer("FusedConv", 4, **attrs), {}, CPU)([x, w, b, r])[0]
    torch.testing.assert_close(got, ref("FusedConv", x, w, b, r, **attrs), rtol=1e-5, atol=1e-5)


_ONEDNN = torch.backends.mkldnn.is_available()


@pytest.mark.parametrize("op,name", [("Attention", "torch_sdpa"), ("LayerNormalization", "torch_layer_norm"),
                                     ("MatMulEpilogue", "cpu_dnnl" if onednn_capi.library() is not None else
                                      "onednn_linear" if _ONEDNN else "torch_addmm"),
                                     ("FusedConv", "cpu_dnnl" if onednn_capi.library() is not None else
                                      "cpu_onednn_nhwc" if _ONEDNN else "torch_conv")])
def test_library_tactic_preferred_over_the_reference_on_cpu(op, name):
    found, _ = candidates(layer(op, 3), CPU)
    names = [t.name for t, _ in found]
    assert found[0][0].name == name and "torch_ref" in names
    if op == "MatMulEpilogue":
        assert names.index("torch_addmm") < names.index("torch_ref")


def test_sdpa_nan_to_zero_rows():
    q, k, v = torch.randn(1, 2, 3, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    keep = torch.ones(1, 1, 3, 5, dtype=torch.bool)
    keep[..., 1, :] = False
    got = TorchSDPA.build(layer("Attention", 4, nan_to_zero=1), {}, CPU)([q, k, v, keep])[0]
    torch.testing.assert_close(got, ref("Attention", q, k, v, keep, nan_to_zero=1), rtol=1e-5, atol=1e-5)
    assert torch.all(got[..., 1, :] == 0)


def test_sdpa_scalar_and_vector_masks():
    q, k, v = torch.randn(2, 3, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    for m in (torch.tensor(0.5), torch.randn(5)):
        got = TorchSDPA.build(layer("Attention", 4), {}, CPU)([q, k, v, m])[0]
        torch.testing.assert_close(got, ref("Attention", q, k, v, m), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("with_residual", [False, True])
def test_matmul_epilogue_multiplies_a_transposed_input_in_memory_order(with_residual):
    """A (S, B, K) view of a dense (B, S, K) tensor is multiplied without a copy and y comes back as the same
    permutation of a dense result (rows_in_memory_order), equal to the reference."""
    from tensorforge.ir import Layer, get_spec
    from tensorforge.kernels.torch_fused import TorchMatMulEpilogue
    torch.manual_seed(0)
    a = torch.randn(2, 5, 8).transpose(0, 1)                      # (5, 2, 8), not contiguous
    w, bias = torch.randn(8, 6), torch.randn(6)
    ins = [a, w, bias] + ([torch.randn(5, 2, 6)] if with_residual else [])
    layer = Layer("mm", "MatMulEpilogue", [f"i{k}" for k in range(len(ins))], ["y"], {"activation": "Relu"})
    y = TorchMatMulEpilogue.build(layer, {}, torch.device("cpu"))(ins)[0]
    want = get_spec("MatMulEpilogue").reference(*ins, activation="Relu")
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)
    assert y.shape == (5, 2, 6) and y.transpose(0, 1).is_contiguous()
