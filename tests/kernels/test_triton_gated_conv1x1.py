"""GatedConv 1×1 as one Triton GEMM whose A tile is scaled by the squeeze-excite gate as it loads
(kernels/triton_gated_conv1x1.py), under TRITON_INTERPRET=1, against onnxruntime running Mul(x, gate) → Conv →
[Add residual] → activation → [Add residual] in float32 on the same values (the Mul's product rounded to half
when x is half, as the unfused half Mul stores it): per-sample and shared gates, NCHW and channels-last x, rows of
one tile spanning two samples, partial tiles. Also: the tactic's reasons."""

import numpy as np
import pytest
import torch

from epilogue_oracle import conv_epilogue_oracle
from tensorforge.ir import Layer
from tensorforge.kernels.triton_gated_conv1x1 import CONFIGS, TritonGatedConv1x1, gated_conv1x1

SMALL = {"BM": 16, "BN": 16, "BK": 16, "G": 1, "stages": 1, "warps": 1}


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("shared_gate", [False, True])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("act,res,res_first", [("none", False, 0), ("HardSwish", True, 1), ("Relu", True, 0)])
def test_gated_conv1x1_matches_onnxruntime(dtype, shared_gate, channels_last, act, res, res_first):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3, 40, 3, 5, generator=g).to(dtype)       # 15 rows a sample: 16-row tiles straddle samples
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    gate = torch.rand(1 if shared_gate else 3, 40, 1, 1, generator=g).to(dtype) * 2     # K = 40: a partial K step
    w, b = (torch.randn(24, 40, 1, 1, generator=g) * 0.3).to(dtype), torch.randn(24, generator=g).to(dtype)
    r = torch.randn(3, 24, 3, 5, generator=g).to(dtype) if res else None
    got = gated_conv1x1(x, gate, w, b, r, act, residual_first=res_first, cfg=SMALL)
    want = conv_epilogue_oracle(x, w, b, r, None, act, res_first, gate=gate)
    assert got.shape == (3, 24, 3, 5) and got.is_contiguous(memory_format=torch.channels_last)
    err = np.abs(got.float().numpy() - want)
    tol = 2e-3 if dtype == torch.float16 else 1e-5
    assert np.abs(want).max() > 0.5 and (err <= tol * np.abs(want) + tol * np.abs(want).max()).all(), err.max()
    ungated = conv_epilogue_oracle(x, w, b, r, None, act, res_first)        # the gate matters at this tolerance
    assert np.abs(ungated - want).max() > 100 * tol * np.abs(want).max()


def test_tactic_reasons():
    x, gate, w = torch.randn(1, 16, 4, 4).half(), torch.rand(1, 16, 1, 1).half(), torch.randn(8, 16, 1, 1).half()
    layer = Layer("c", "GatedConv", ["x", "g", "w", "b"], ["y"], {"kernel_shape": [1, 1], "activation": "HardSwish"})
    assert TritonGatedConv1x1.fits(layer, CONFIGS[0], [x, gate, w]) is None
    got = TritonGatedConv1x1.build(layer, SMALL, torch.device("cpu"))([x, gate, w, torch.zeros(8).half()])[0]
    assert got.shape == (1, 8, 4, 4)
    assert "Triton kernels run on CUDA" in TritonGatedConv1x1.supports(layer, torch.device("cpu"))
    k3 = Layer("c", "GatedConv", ["x", "g", "w"], ["y"], {"kernel_shape": [3, 3]})
    assert "not 1×1" in TritonGatedConv1x1.supports(k3, torch.device("cuda"))
    skinny = next(c for c in CONFIGS if c["BM"] == 16)
    assert "at most 64 rows" in TritonGatedConv1x1.fits(layer, skinny, [torch.randn(1, 16, 9, 9).half(), gate, w])


ON_CUDA = r'''
import torch
import torch.nn.functional as F
from tensorforge.kernels.triton_gated_conv1x1 import CONFIGS, gated_conv1x1
for (n, c, o, h) in ((1, 672, 112, 14), (32, 240, 40, 28), (32, 1152, 320, 7)):
    x = torch.randn(n, c, h, h, device="cuda").half().contiguous(memory_format=torch.channels_last)
    gate = torch.rand(n, c, 1, 1, device="cuda").half()
    w = (torch.randn(o, c, 1, 1, device="cuda") * 0.05).half()
    b = torch.randn(o, device="cuda").half()
    want = F.conv2d((x * gate).float(), w.float(), b.float())
    for cfg in CONFIGS:
        got = gated_conv1x1(x, gate, w, b, None, "none", cfg=cfg)
        torch.testing.assert_close(got.float(), want, rtol=2e-3, atol=2e-3 * float(want.abs().max()))
print("OK")
'''


def test_gated_conv1x1_on_cuda_at_efficientnet_shapes():
    """The compiled kernel on a GPU (skips without CUDA; a subprocess without TRITON_INTERPRET): EfficientNet-B0's
    and MobileNetV3's projection shapes at batch 1 and 32, every config, against torch's float32 convolution of the
    half product x·gate."""
    import os
    import subprocess
    import sys
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", ON_CUDA], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr[-3000:]
