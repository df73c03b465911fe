"""The int8 MaxPool tactic (kernels/quant_maxpool.py) and the one-pass int8 im2col (kernels/quant_im2col.py)
under TRITON_INTERPRET=1 on small CPU tensors. Oracles: onnxruntime's own int8/uint8 MaxPool (one-node model)
for the pool — pads, strides, dilations, ceil_mode, NCHW and channels-last inputs; torch's F.unfold of the
explicitly padded input (its (C, kh, kw) columns reordered to (kh, kw, C)) for the im2col, uint8 shifted by 128."""

import numpy as np
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper

from tensorforge.kernels.quant_im2col import im2col_int8
from tensorforge.kernels.quant_maxpool import max_pool_int8

POOLS = [dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
         dict(kernel_shape=[2, 2], strides=[2, 2]),
         dict(kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1], ceil_mode=1),
         dict(kernel_shape=[3, 2], dilations=[2, 1], pads=[2, 0, 1, 1])]


def _codes(dtype, shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    lo, hi = (-128, 128) if dtype == torch.int8 else (0, 256)
    return torch.randint(lo, hi, shape, generator=g, dtype=torch.int16).to(dtype)


def _ort_maxpool(x: np.ndarray, attrs: dict) -> np.ndarray:
    t = TensorProto.INT8 if x.dtype == np.int8 else TensorProto.UINT8
    node = helper.make_node("MaxPool", ["x"], ["y"], **attrs)
    g = helper.make_graph([node], "p", [helper.make_tensor_value_info("x", t, list(x.shape))],
                          [helper.make_tensor_value_info("y", t, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8])
@pytest.mark.parametrize("attrs", POOLS)
@pytest.mark.parametrize("channels_last", [False, True])
def test_int8_maxpool_matches_onnxruntime(dtype, attrs, channels_last):
    x = _codes(dtype, (2, 5, 9, 11))
    want = _ort_maxpool(x.numpy(), attrs)
    xx = x.contiguous(memory_format=torch.channels_last) if channels_last else x
    got = max_pool_int8(xx, attrs, {"BLOCK_P": 16, "BLOCK_C": 8})
    assert got.dtype == dtype and tuple(got.shape) == want.shape
    np.testing.assert_array_equal(got.numpy(), want)


def test_int8_maxpool_refuses_float():
    with pytest.raises(ValueError, match="int8/uint8"):
        max_pool_int8(torch.randn(1, 2, 4, 4), POOLS[0])


def _unfold_oracle(x, w_shape, attrs, pad):
    """(M, kh·kw·C) columns from F.unfold of x padded with `pad` (in the int8 domain of the output)."""
    v = x.to(torch.int32) - (128 if x.dtype == torch.uint8 else 0)
    p = attrs.get("pads") or (0, 0, 0, 0)
    vp = F.pad(v.double(), (p[1], p[3], p[0], p[2]), value=float(pad))
    kh, kw = w_shape[2:]
    cols = F.unfold(vp, (kh, kw), dilation=attrs.get("dilations") or 1, stride=attrs.get("strides") or 1)
    n, c = x.shape[:2]
    cols = cols.reshape(n, c, kh, kw, -1).permute(0, 4, 2, 3, 1)        # (N, L, kh, kw, C)
    return cols.reshape(-1, kh * kw * c).to(torch.int8)


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8])
@pytest.mark.parametrize("w_shape,attrs", [((4, 3, 7, 7), dict(strides=[2, 2], pads=[3, 3, 3, 3])),
                                           ((4, 5, 1, 1), dict(strides=[2, 2])),
                                           ((4, 5, 3, 3), dict(pads=[1, 0, 2, 1], dilations=[2, 1]))])
def test_im2col_matches_unfold(dtype, w_shape, attrs):
    x = _codes(dtype, (2, w_shape[1], 9, 11), seed=1)
    pad = -5 if dtype == torch.uint8 else 7
    k = w_shape[1] * w_shape[2] * w_shape[3]
    for xx in (x, x.contiguous(memory_format=torch.channels_last)):
        a, nhw = im2col_int8(xx, w_shape, attrs, pad, row_stride=-(-k // 16) * 16, shift=True)
        want = _unfold_oracle(x, w_shape, attrs, pad)
        assert a.dtype == torch.int8 and a.stride(0) % 16 == 0 and a.shape[0] == nhw[0] * nhw[1] * nhw[2]
        assert torch.equal(a, want)


@pytest.mark.parametrize("xdt", [torch.uint8, torch.int8])
def test_explicit_gemm_conv_through_the_triton_im2col_is_bit_exact(xdt, monkeypatch):
    """The explicit-GEMM (IMPLICIT=0) Triton conv fed by im2col_int8 (as on CUDA): a 7×7/2 stem-like conv of 3
    channels (K = 147, rows padded to 160), asymmetric zero point, ReLU and int8 out, against the op's reference
    (ir/ops/quantized.py, itself checked against onnxruntime's exact Q/DQ)."""
    from tensorforge.ir import Layer, get_spec
    from tensorforge.kernels import quant_gemm, triton_int8_gemm
    calls = []
    monkeypatch.setattr(quant_gemm, "triton_im2col", lambda x: calls.append(x.shape) or True)
    x = _codes(xdt, (2, 3, 15, 13), seed=2)
    w = _codes(torch.int8, (8, 3, 7, 7), seed=3)
    spec = get_spec("QuantizedConv")
    layer = Layer("q", "QuantizedConv", ["x", "w", "b"], ["y"], spec.resolve_attrs(dict(
        x_dtype="uint8" if xdt == torch.uint8 else "int8", x_scale=0.02, x_zero_point=90 if xdt == torch.uint8 else -4,
        w_scale=(torch.rand(8) * 0.01 + 1e-3).tolist(), strides=[2, 2], pads=[3, 3, 3, 3], kernel_shape=[7, 7],
        activation="Relu", y_scale=0.05, y_zero_point=-3, y_dtype="int8")))
    b = torch.randn(8)
    want = spec.reference(x, w, b, **layer.attrs)
    cfg = {"BM": 16, "BN": 16, "BK": 32, "G": 1, "stages": 1, "warps": 1, "IMPLICIT": 0}
    got = triton_int8_gemm.build_kernel(layer, cfg, torch.device("cpu"), interpret=True)([x, w, b])[0]
    assert calls and torch.equal(got, want)
