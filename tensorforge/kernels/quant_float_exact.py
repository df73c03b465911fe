"""Tactic: QuantizedConv / QuantizedConvTranspose of 8-bit integers as a float32 convolution (cuDNN, oneDNN) of
the centred values, exact whenever every partial sum is an integer float32 holds: (x − zx) and (w − zw) lie in
[−255, 255] (exact in float32 and in TF32's 10-bit mantissa), so with K = (C_in / group)·Πk products a sum
stays below 2²⁴ when K·255² ≤ 2²⁴, i.e. K ≤ 258 — every depthwise convolution (MobileNet, EfficientNet), which
the GEMM tactics do not take. Larger K runs the same convolution in float64 (exact to 2⁵³). The accumulator is
rounded to the nearest integer (a no-op when exact) and goes through the reference epilogue.
Traffic: x and w read once as float32 (4 bytes/elem, converted on the fly), acc written and read once.
"""

import torch

from ..ir import get_spec
from ..ir.ops.quantized import centered, channel_multiplier, requantize
from .registry import tactic

EXACT_K = (1 << 24) // (255 * 255)      # 258


def _build(layer, cfg, device):
    a = layer.attrs
    transpose = layer.op == "QuantizedConvTranspose"
    conv = get_spec("ConvTranspose" if transpose else "Conv").reference
    keys = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides") + \
        (("output_padding", "output_shape") if transpose else ())
    conv_attrs = {k: a[k] for k in keys}
    mult = channel_multiplier(a["x_scale"], a["w_scale"]).to(device)
    prepared: dict = {}

    def run(inputs):
        x, w = inputs[0], inputs[1]
        bias = inputs[2] if len(inputs) > 2 else None
        res = inputs[3] if len(inputs) > 3 else None
        post = inputs[4] if len(inputs) > 4 else None
        per_group = (w.shape[0] if transpose else w.shape[1]) * w[0, 0].numel()
        dtype = torch.float32 if per_group <= EXACT_K else torch.float64
        key = (w.data_ptr(), w._version, dtype)
        if key not in prepared:
            prepared.clear()
            prepared[key] = centered(w, a["w_zero_point"], 1 if transpose else 0).to(dtype)
        acc = conv(centered(x, a["x_zero_point"]).to(dtype), prepared[key], None, **conv_attrs)
        y = requantize(torch.round(acc), mult, bias, res, a, 1, post)
        return list(y) if isinstance(y, tuple) else [y]         # (float, quantized) with a second output
    return run


class _FloatExact:
    @staticmethod
    def supports(layer, device):
        if layer.attrs.get("x_dtype") not in ("int8", "uint8"):
            return f"{layer.attrs.get('x_dtype')} activations: the exactness argument is for 8-bit integers"
        return None

    build = staticmethod(_build)


for _op in ("QuantizedConv", "QuantizedConvTranspose"):
    tactic(_op, name="float_exact", priority=8)(type(f"FloatExact_{_op}", (_FloatExact,), {}))
