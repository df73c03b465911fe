"""The quantized-kernel smoke's fp8 rule (bench/gpu_smoke/quant_kernels.py fp8_close): an fp8 GEMM output may miss
the float64 reference by the accumulator's rounding where its terms cancel (near zero that is many fp8 steps), and
nothing else. Oracle: the op reference, with the float result moved before its quantize by a closed-form amount."""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "gpu_smoke"))
import quant_kernels as qk  # noqa: E402
from tensorforge.ir import get_spec  # noqa: E402


def _case():
    torch.manual_seed(0)
    layer = qk.make_layer("QuantizedMatMul", 48, fp8=True, act="none")
    x = (torch.randn(64, 96) * 2).to(torch.float8_e4m3fn)
    w = torch.randn(48, 96).to(torch.float8_e4m3fn)
    b = torch.zeros(48)              # outputs of both signs near zero, where cancellation shows
    return layer, [x, w, b]


def _quantized(layer, inputs, move):
    """Q(y + move(y, magnitude)) through the reference: y the float output (y_scale 0), then the layer's Q."""
    spec = get_spec(layer.op)
    flat = {**layer.attrs, "y_scale": 0.0, "y_dtype": "float32"}
    y = spec.reference(*inputs, **flat).double()
    mag = qk.term_magnitude(layer, inputs).double() * layer.attrs["y_scale"]
    q = spec.reference(*inputs, **layer.attrs)
    moved = (move(y, mag) / layer.attrs["y_scale"]).clamp(-448, 448).float().to(torch.float8_e4m3fn)
    return q, moved, mag


def test_accumulation_error_near_zero_passes_and_a_wrong_scale_fails():
    layer, inputs = _case()
    # the accumulator's rounding where the terms cancel: half the allowed 2^-12 of the terms' size on the outputs
    # smaller than 2^-10 of it (many fp8 steps there: the GPU's miss on BERT's QKV shape)
    def cancel(y, mag):
        return torch.where(y.abs() < mag * 2.0 ** -10, y + mag * 2.0 ** -(qk.ACC_BITS + 1), y)
    want, got, _ = _quantized(layer, inputs, cancel)
    ok, note = qk.fp8_ok(got, want, qk.term_magnitude(layer, inputs))
    assert ok, note
    strict, _ = qk.fp8_ok(got, want)              # without the floor the same result fails
    assert not strict
    want, got, _ = _quantized(layer, inputs, lambda y, mag: y * 1.01)        # an epilogue scale 1 % off
    ok, note = qk.fp8_ok(got, want, qk.term_magnitude(layer, inputs))
    assert not ok, note
