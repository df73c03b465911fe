"""The depthwise convolution + epilogue kernel (kernels/triton_depthwise.py) under TRITON_INTERPRET=1, against
onnxruntime running the unfused ONNX graph (Conv with group = C → [Add residual] → activation → [Add residual])
in float32 on the same values: stride 1 and 2, 3×3 and 5×5, dilation, asymmetric and SAME_UPPER padding, both
layouts, partial position and channel tiles. Also: the tactic's reasons for what it does not run."""

import numpy as np
import pytest
import torch

from epilogue_oracle import conv_epilogue_oracle
from tensorforge.ir import Layer
from tensorforge.kernels.triton_depthwise import CONFIGS, FusedConvDepthwise, depthwise_conv

SMALL = {"BLOCK_P": 16, "BLOCK_C": 8, "warps": 1}
# one small config per kernel form: the flat kernel in both layouts; the rows kernel with one output row per program
# (plain tap loop), with 2 and with 4 (input rows shared between output rows: masked taps, partial row blocks)
LAYOUTS = {"nhwc": {"layout": "nhwc", **SMALL}, "nchw": {"layout": "nchw", **SMALL},
           "rows1": {"layout": "rows", "BH": 1, "BW": 4, "BC": 8, "warps": 1},
           "rows2": {"layout": "rows", "BH": 2, "BW": 8, "BC": 4, "warps": 1},
           "rows4": {"layout": "rows", "BH": 4, "BW": 4, "BC": 8, "warps": 1}}


def oracle(x, w, bias, residual, attrs, act, residual_first):
    return conv_epilogue_oracle(x, w, bias, residual, attrs, act, residual_first)


def _check(got, want, rtol):
    g = got.detach().to(torch.float64).numpy()
    assert g.shape == want.shape
    err = np.abs(g - want)
    assert (err <= rtol * np.abs(want) + rtol * np.abs(want).max()).all(), err.max()
    assert np.abs(want).max() > 0.5                          # not a constant output


CASES = [  # (N, C, H, W), kernel, attrs, activation, residual, residual_first
    ((2, 12, 9, 11), 3, {"pads": [1, 1, 1, 1]}, "HardSwish", False, 0),
    ((1, 20, 10, 10), 5, {"pads": [2, 2, 2, 2], "strides": [2, 2]}, "Relu", False, 0),
    ((2, 9, 8, 7), 3, {"pads": [0, 1, 2, 1], "dilations": [2, 2]}, "none", True, 0),
    ((1, 16, 7, 9), 3, {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, "HardSwish", True, 1),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("case", range(len(CASES)))
def test_depthwise_matches_onnxruntime(dtype, layout, case):
    shape, k, attrs, act, with_res, res_first = CASES[case]
    g = torch.Generator().manual_seed(case)
    n, c = shape[0], shape[1]
    x = torch.randn(*shape, generator=g).to(dtype)
    w = (torch.randn(c, 1, k, k, generator=g) * 0.4).to(dtype)
    bias = torch.randn(c, generator=g).to(dtype)
    attrs = {**attrs, "group": c, "kernel_shape": [k, k]}
    ref_y = oracle(x, w, bias, None, attrs, "none", 0)                # the output's shape, for the residual
    residual = torch.randn(*ref_y.shape, generator=g).to(dtype) if with_res else None
    want = oracle(x, w, bias, residual, attrs, act, res_first)
    got = depthwise_conv(x, w, bias, residual, attrs, act, residual_first=res_first,
                         channels_last=layout == "nhwc", cfg=LAYOUTS[layout])
    assert got.dtype == dtype
    assert got.is_contiguous(memory_format=torch.contiguous_format if layout == "nchw" else torch.channels_last)
    _check(got, want, 2e-3 if dtype == torch.float16 else 2e-5)


@pytest.mark.parametrize("layout", ["nchw", "rows4"])
def test_a_wrong_tap_is_caught(layout):
    """The comparison's power: flipping the filter (w[..., ::-1, ::-1]) makes the same kernel miss."""
    shape, k, attrs, act, _, _ = CASES[0]
    x, w = torch.randn(*shape), torch.randn(shape[1], 1, k, k)
    attrs = {**attrs, "group": shape[1], "kernel_shape": [k, k]}
    want = oracle(x, w, None, None, attrs, act, 0)
    got = depthwise_conv(x, w.flip(-1, -2).contiguous(), None, None, attrs, act, cfg=LAYOUTS[layout])
    with pytest.raises(AssertionError):
        _check(got, want, 2e-5)


def test_tactic_runs_fused_conv_layers_and_says_what_it_does_not():
    x, w, b = torch.randn(1, 8, 6, 6), torch.randn(8, 1, 3, 3), torch.randn(8)
    attrs = {"group": 8, "pads": [1, 1, 1, 1], "kernel_shape": [3, 3], "activation": "Relu"}
    layer = Layer("dw", "FusedConv", ["x", "w", "b"], ["y"], attrs)
    assert FusedConvDepthwise.fits(layer, CONFIGS[0], [x, w, b]) is None
    got = FusedConvDepthwise.build(layer, {**CONFIGS[0], **SMALL}, torch.device("cpu"))([x, w, b])[0]
    _check(got, oracle(x, w, b, None, {k: v for k, v in attrs.items() if k != "activation"}, "Relu", 0), 2e-5)
    dense = Layer("c", "FusedConv", ["x", "w"], ["y"], {"group": 1})
    assert "group 1" in FusedConvDepthwise.supports(dense, torch.device("cuda"))
    assert "channel multiplier of 2" in FusedConvDepthwise.fits(layer, CONFIGS[0], [x, torch.randn(16, 1, 3, 3)])
    assert "batch 70000" in FusedConvDepthwise.fits(layer, CONFIGS[0], [torch.empty(70000, 8, 1, 1), w])
    grouped = Layer("g", "FusedConv", ["x", "w"], ["y"], {"group": 4})
    assert "not depthwise" in FusedConvDepthwise.fits(grouped, CONFIGS[0], [x, torch.randn(8, 2, 3, 3)])



@pytest.mark.parametrize("store_y", [True, False])
@pytest.mark.parametrize("layout", ["nhwc", "nchw", "rows2"])
def test_fused_conv_pool_depthwise_writes_y_and_its_mean(store_y, layout):
    """FusedConvPool (squeeze-excite's depthwise conv): Y and P = mean of Y over the positions, against onnxruntime's
    Conv → HardSwish and GlobalAveragePool of it; 13×11 positions in 16-position blocks (a partial last block whose
    masked positions must not count). Y absent (only the pool reads it): P alone, Y never written."""
    from tensorforge.kernels.triton_depthwise import FusedConvPoolDepthwise
    g = torch.Generator().manual_seed(3)
    x, w, b = torch.randn(2, 12, 13, 11, generator=g).half(), (torch.randn(12, 1, 5, 5, generator=g) * 0.3).half(), \
        torch.randn(12, generator=g).half()
    attrs = {"group": 12, "pads": [2, 2, 2, 2], "kernel_shape": [5, 5]}
    layer = Layer("dw", "FusedConvPool", ["x", "w", "b"], ["y" if store_y else "", "p"],
                  {**attrs, "activation": "HardSwish"})
    y, pooled = FusedConvPoolDepthwise.build(layer, LAYOUTS[layout], torch.device("cpu"))([x, w, b])
    want_y = oracle(x, w, b, None, attrs, "HardSwish", 0)
    assert (y is not None) == store_y
    if store_y:
        _check(y, want_y, 2e-3)
    assert pooled.shape == (2, 12, 1, 1) and pooled.dtype == torch.float16
    _check(pooled, want_y.mean(axis=(2, 3), keepdims=True), 2e-3)


def _q8(y, scale, zp):
    """QuantizeLinear to int8 written out: round half to even of float32(y) / scale, + zp, saturated."""
    return torch.clamp(torch.round(y.float() / torch.tensor(scale, dtype=torch.float32)) + zp, -128, 127).to(torch.int8)


@pytest.mark.parametrize("layout", ["nhwc", "nchw", "rows2"])
def test_quantize_forms_write_the_codes_of_what_they_store(layout):
    """FusedConvQuantize: Q(y) from the epilogue, equal to QuantizeLinear of the stored y written out, laid out like
    y; with y absent (only the Q reads it) the same codes and no y. FusedConvPoolQuantize: Q(P) from the pool's
    reduction, P against onnxruntime's GlobalAveragePool."""
    from tensorforge.ir import get_spec
    from tensorforge.kernels.triton_depthwise import FusedConvPoolQuantizeDepthwise, FusedConvQuantizeDepthwise
    g = torch.Generator().manual_seed(5)
    x, w, b = torch.randn(2, 12, 9, 10, generator=g).half(), (torch.randn(12, 1, 3, 3, generator=g) * 0.4).half(), \
        torch.randn(12, generator=g).half()
    conv = {"group": 12, "pads": [1, 1, 1, 1], "kernel_shape": [3, 3]}
    cfg = LAYOUTS[layout]
    q = {"q_scale": 0.02, "q_zero_point": -3, "q_dtype": "int8"}
    want_y = oracle(x, w, b, None, conv, "Relu", 0)
    codes = {}
    for store_y in (True, False):
        attrs = get_spec("FusedConvQuantize").resolve_attrs({**conv, "activation": "Relu", **q})
        layer = Layer("dw", "FusedConvQuantize", ["x", "w", "b"], ["y" if store_y else "", "yq"], attrs)
        y, codes[store_y] = FusedConvQuantizeDepthwise.build(layer, cfg, torch.device("cpu"))([x, w, b])
        assert (y is not None) == store_y and codes[store_y].dtype == torch.int8
        if store_y:
            _check(y, want_y, 2e-3)
            assert torch.equal(codes[True], _q8(y, 0.02, -3)) and codes[True].stride() == y.stride()
            assert len(set(codes[True].flatten().tolist())) > 20                  # not a constant
    assert torch.equal(codes[False], codes[True])
    attrs = get_spec("FusedConvPoolQuantize").resolve_attrs({**conv, "activation": "Relu", **q})
    layer = Layer("dw", "FusedConvPoolQuantize", ["x", "w", "b"], ["", "p", "pq"], attrs)
    y, pooled, p_codes = FusedConvPoolQuantizeDepthwise.build(layer, cfg, torch.device("cpu"))([x, w, b])
    assert y is None
    _check(pooled, want_y.mean(axis=(2, 3), keepdims=True), 2e-3)
    assert torch.equal(p_codes, _q8(pooled, 0.02, -3))


ON_CUDA = r'''
import torch
import torch.nn.functional as F
from tensorforge.kernels.triton_depthwise import CONFIGS, depthwise_conv
for cfg in CONFIGS:
  for n, c, h, k, s in ((32, 72, 56, 3, 2), (32, 240, 28, 5, 1), (32, 672, 14, 5, 2), (4, 96, 56, 7, 1)):
    x = torch.randn(n, c, h, h, device="cuda").half()
    w = (torch.randn(c, 1, k, k, device="cuda") * 0.3).half()
    b = torch.randn(c, device="cuda").half()
    attrs = {"group": c, "pads": [k // 2] * 4, "strides": [s, s], "kernel_shape": [k, k]}
    want = F.hardswish(F.conv2d(x.float(), w.float(), b.float(), s, k // 2, 1, c))
    cl = cfg["layout"] != "nchw"
    got = depthwise_conv(x, w, b, None, attrs, "HardSwish", channels_last=cl, cfg=cfg)
    torch.testing.assert_close(got.float(), want, rtol=2e-3, atol=2e-3 * float(want.abs().max()))
    _, pooled = depthwise_conv(x, w, b, None, attrs, "HardSwish", channels_last=cl, cfg=cfg, pool=True,
                               store_y=False)
    torch.testing.assert_close(pooled.float(), want.mean((2, 3), keepdim=True), rtol=2e-3,
                               atol=2e-3 * float(want.abs().max()))
print("OK")
'''


def test_depthwise_on_cuda_at_mobilenet_shapes():
    """The compiled kernel on a GPU (skips without CUDA; a subprocess without TRITON_INTERPRET, which this test
    session sets): MobileNetV3 / EfficientNet depthwise shapes at batch 32, both layouts, with and without the
    pool, every config (both kernels, both layouts), against torch's float32 convolution of the same float16 values."""
    import os
    import subprocess
    import sys
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (the interpreter tests above cover the CPU)")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", ON_CUDA], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-3000:]
