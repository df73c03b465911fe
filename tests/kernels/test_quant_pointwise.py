"""Standalone QuantizeLinear/DequantizeLinear tactics (kernels/quant_pointwise.py) are bit-exact to the ONNX
references (ir/ops/quant.py, themselves tested against the ONNX backend suite): torch_float on the CPU, and the
one-pass Triton kernel under TRITON_INTERPRET=1 — per tensor, per axis, channels-last, uint8/int8/fp8, ties."""

import pytest
import torch

from tensorforge.ir import Layer, get_spec
from tensorforge.kernels import quant_pointwise as qp


def _layer(op, **attrs):
    return Layer("q", op, ["x", "s", "z"], ["y"], get_spec(op).resolve_attrs(attrs))


CASES = [(torch.uint8, False, False), (torch.int8, True, False), (torch.int8, True, True),
         (torch.float8_e4m3fn, False, True), (torch.uint8, True, True)]


def _operands(dtype, per_axis, channels_last):
    x = torch.randn(2, 6, 5, 7) * 3
    x[0, 0, 0, :4] = torch.tensor([0.5, 1.5, -2.5, 2.5]) * 0.05      # exact ties: half to even
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    s = torch.full((6,), 0.05) * (1 + torch.arange(6) / 6) if per_axis else torch.tensor(0.05)
    if per_axis:
        s[0] = 0.05
    if dtype == torch.float8_e4m3fn:
        z = torch.zeros(s.shape, dtype=dtype)
    else:
        z = torch.randint(0 if dtype == torch.uint8 else -10, 130 if dtype == torch.uint8 else 10, s.shape).to(dtype)
    return x, s.float(), z


def _same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype == torch.float8_e4m3fn:
        a, b = a.view(torch.uint8), b.view(torch.uint8)
    assert torch.equal(a, b), (a.float() - b.float()).abs().max()


@pytest.mark.parametrize("dtype,per_axis,channels_last", CASES)
def test_quantize_and_dequantize_are_bit_exact(dtype, per_axis, channels_last):
    x, s, z = _operands(dtype, per_axis, channels_last)
    q_layer, dq_layer = _layer("QuantizeLinear", axis=1), _layer("DequantizeLinear", axis=1)
    want_q = get_spec("QuantizeLinear").reference(x, s, z, **q_layer.attrs)
    _same(qp.torch_quantize(x, s, z, q_layer), want_q)
    _same(qp.triton_qdq(q_layer, [x, s, z], block=128, interpret=True), want_q)
    want_dq = get_spec("DequantizeLinear").reference(want_q, s, z, **dq_layer.attrs)
    _same(qp.torch_dequantize(want_q, s, z, dq_layer), want_dq)
    _same(qp.triton_qdq(dq_layer, [want_q, s, z], block=128, interpret=True), want_dq)


def test_half_scales_use_the_scale_type_and_triton_declines():
    x, s, z = _operands(torch.int8, False, False)
    layer = _layer("QuantizeLinear", axis=1)
    want = get_spec("QuantizeLinear").reference(x.half(), s.half(), z, **layer.attrs)
    _same(qp.torch_quantize(x.half(), s.half(), z, layer), want)
    assert "float32" in qp._fits(layer, {}, [x.half(), s.half(), z])
    assert "blocked" in qp._reason(_layer("DequantizeLinear", block_size=4))
