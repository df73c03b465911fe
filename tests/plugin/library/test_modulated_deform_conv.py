"""mmcv::MMCVModulatedDeformConv2d: Triton deformable im2col (TRITON_INTERPRET=1) + GEMM against the torch
reference; the reference against torch's conv2d (zero offsets, unit mask) and against a shifted conv2d
(integer offsets); and the plugin through an ONNX model with and without bias."""

import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, numpy_helper

import tensorforge as tfg
import tensorforge.plugin as tfp
from tensorforge.plugin.library.modulated_deform_conv.reference import modulated_deform_conv
from plugin_helpers import custom_model


def _plugin():
    tfp.discover("MMCVModulatedDeformConv2d")
    return tfp.get("mmcv::MMCVModulatedDeformConv2d")


def _inputs(N=2, Cin=4, H=6, W=7, Cout=6, k=3, stride=1, pad=1, dil=1, dg=2, groups=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    Ho = (H + 2 * pad - dil * (k - 1) - 1) // stride + 1
    Wo = (W + 2 * pad - dil * (k - 1) - 1) // stride + 1
    x = torch.randn(N, Cin, H, W, generator=g)
    offset = torch.randn(N, 2 * dg * k * k, Ho, Wo, generator=g) * 1.5
    mask = torch.rand(N, dg * k * k, Ho, Wo, generator=g)
    weight = torch.randn(Cout, Cin // groups, k, k, generator=g)
    bias = torch.randn(Cout, generator=g)
    attrs = dict(stride=[stride, stride], padding=[pad, pad], dilation=[dil, dil], groups=groups, deform_groups=dg)
    return x, offset, mask, weight, bias, attrs


def test_reference_equals_conv2d_without_deformation():
    x, offset, mask, weight, bias, attrs = _inputs(stride=2, dil=2, pad=2)
    got = modulated_deform_conv(x, torch.zeros_like(offset), torch.ones_like(mask), weight, bias, **attrs)
    want = F.conv2d(x, weight, bias, stride=2, padding=2, dilation=2, groups=2)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_reference_integer_offsets_shift_the_input():
    x, offset, mask, weight, bias, attrs = _inputs(dg=1, groups=1)
    off = torch.zeros_like(offset)
    off[:, 1::2] = 1.0                                      # every tap samples one pixel to the right
    got = modulated_deform_conv(x, off, torch.ones_like(mask), weight, None, **attrs)
    padded = F.pad(x, (1, 1, 1, 1))
    shifted = F.pad(padded[..., 1:], (0, 1))                # padded(y, x+1), zero beyond the edge
    torch.testing.assert_close(got, F.conv2d(shifted, weight, None), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, pad=0, dg=1, groups=1), dict(dil=2, pad=2, k=3, dg=4,
                                                                                     groups=1, Cin=4)])
def test_triton_matches_reference(kw):
    x, offset, mask, weight, bias, attrs = _inputs(**kw)
    (got,) = _plugin().run([x, offset, mask, weight, bias], attrs)
    torch.testing.assert_close(got, modulated_deform_conv(x, offset, mask, weight, bias, **attrs), rtol=1e-4,
                               atol=1e-4)
    (got,) = _plugin().run([x, offset, mask, weight], attrs)            # without the optional bias
    torch.testing.assert_close(got, modulated_deform_conv(x, offset, mask, weight, None, **attrs), rtol=1e-4,
                               atol=1e-4)


def test_triton_fp16():
    x, offset, mask, weight, bias, attrs = _inputs()
    args = [t.half() for t in (x, offset, mask, weight, bias)]
    (got,) = _plugin().run(args, attrs)
    want = modulated_deform_conv(*[t.float() for t in args[:4]], args[4].float(), **attrs)
    assert got.dtype == torch.float16
    torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("with_bias", [True, False])
def test_onnx_node_builds_and_runs(with_bias):
    x, offset, mask, weight, bias, attrs = _inputs()
    Fl = TensorProto.FLOAT
    inits = [numpy_helper.from_array(weight.numpy(), "w")] + ([numpy_helper.from_array(bias.numpy(), "b")]
                                                              if with_bias else [])
    model = custom_model("MMCVModulatedDeformConv2d", [("x", Fl, list(x.shape)), ("off", Fl, list(offset.shape)),
                                                       ("m", Fl, list(mask.shape))], [("y", Fl, None)], domain="mmcv",
                         initializers=inits, node_inputs=["x", "off", "m", "w"] + (["b"] if with_bias else []),
                         **attrs)
    got = tfg.build(model, device="cpu").run({"x": x, "off": offset, "m": mask})["y"]
    want = modulated_deform_conv(x, offset, mask, weight, bias if with_bias else None, **attrs)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
