"""The 1×1 convolution as one Triton GEMM on channels-last rows (kernels/triton_conv1x1.py) under
TRITON_INTERPRET=1, against onnxruntime running Conv → [Add residual] → activation → [Add residual] in float32 on
the same values: NCHW and channels-last inputs, the pointer and the tensor-descriptor main loops, partial tiles.
Also: the tactic's reasons for the convolutions it does not run."""

import numpy as np
import pytest
import torch

from epilogue_oracle import conv_epilogue_oracle
from tensorforge.ir import Layer
from tensorforge.kernels.triton_conv1x1 import CONFIGS, FusedConv1x1, conv1x1_gemm

POINTER = {"BM": 16, "BN": 16, "BK": 32, "G": 1, "stages": 1, "warps": 1}
TMA = {**POINTER, "TMA": 1}


def oracle(x, w, bias, residual, act, residual_first):
    return conv_epilogue_oracle(x, w, bias, residual, None, act, residual_first)


@pytest.mark.parametrize("cfg", [POINTER, TMA], ids=["pointer", "tma"])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("act,res,res_first", [("HardSwish", False, 0), ("Relu", True, 1), ("none", True, 0)])
def test_conv1x1_matches_onnxruntime(cfg, channels_last, act, res, res_first, monkeypatch):
    if cfg.get("TMA"):          # the descriptor loop must run, not the pointer loop it falls back to
        from tensorforge.kernels import triton_gemm

        class Forbidden:
            def __getitem__(self, grid):
                raise AssertionError("the pointer main loop ran instead of the tensor-descriptor one")
        monkeypatch.setattr(triton_gemm, "_gemm_kernel", Forbidden())
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 16, 5, 7, generator=g).half()           # 70 rows: a partial last row tile
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    w, b = (torch.randn(24, 16, 1, 1, generator=g) * 0.3).half(), torch.randn(24, generator=g).half()
    r = torch.randn(2, 24, 5, 7, generator=g).half() if res else None
    got = conv1x1_gemm(x, w, b, r, act, residual_first=res_first, cfg=cfg)
    want = oracle(x, w, b, r, act, res_first)
    assert got.shape == (2, 24, 5, 7) and got.is_contiguous(memory_format=torch.channels_last)
    err = np.abs(got.float().numpy() - want)
    assert np.abs(want).max() > 0.5 and (err <= 2e-3 * np.abs(want) + 2e-3 * np.abs(want).max()).all(), err.max()


def test_tactic_reasons():
    x, w = torch.randn(1, 16, 4, 4).half(), torch.randn(8, 16, 1, 1).half()
    layer = Layer("c", "FusedConv", ["x", "w", "b"], ["y"], {"kernel_shape": [1, 1], "activation": "HardSwish"})
    assert FusedConv1x1.fits(layer, CONFIGS[0], [x, w]) is None
    got = FusedConv1x1.build(layer, POINTER, torch.device("cpu"))([x, w, torch.zeros(8).half()])[0]
    assert got.shape == (1, 8, 4, 4)
    k3 = Layer("c", "FusedConv", ["x", "w"], ["y"], {"kernel_shape": [3, 3]})
    assert "not 1×1" in FusedConv1x1.supports(k3, torch.device("cuda"))
    strided = Layer("c", "FusedConv", ["x", "w"], ["y"], {"strides": [2, 2]})
    assert "strided, padded or dilated" in FusedConv1x1.supports(strided, torch.device("cuda"))
    grouped = Layer("c", "FusedConv", ["x", "w"], ["y"], {"group": 2})
    assert "not a dense convolution" in FusedConv1x1.supports(grouped, torch.device("cuda"))
    assert "at most 64 rows" in FusedConv1x1.fits(layer, CONFIGS[2], [torch.randn(1, 16, 9, 9).half(), w])


ON_CUDA = r'''
import torch
import torch.nn.functional as F
from tensorforge.kernels.triton_conv1x1 import CONFIGS, conv1x1_gemm
for (n, c, o, h) in ((1, 72, 24, 56), (32, 240, 80, 14), (32, 960, 160, 7)):
    x = torch.randn(n, c, h, h, device="cuda").half().contiguous(memory_format=torch.channels_last)
    w = (torch.randn(o, c, 1, 1, device="cuda") * 0.1).half()
    b = torch.randn(o, device="cuda").half()
    want = F.hardswish(F.conv2d(x.float(), w.float(), b.float()))
    for cfg in CONFIGS:
        got = conv1x1_gemm(x, w, b, None, "HardSwish", cfg=cfg)
        torch.testing.assert_close(got.float(), want, rtol=2e-3, atol=2e-3 * float(want.abs().max()))
print("OK")
'''


def test_conv1x1_on_cuda_at_mobilenet_shapes():
    """The compiled GEMM on a GPU (skips without CUDA; a subprocess without TRITON_INTERPRET): MobileNetV3's 1×1
    convolutions at batch 1 and 32, every config, against torch's float32 convolution of the same values."""
    import os
    import subprocess
    import sys
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (the interpreter tests above cover the CPU)")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", ON_CUDA], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-3000:]
