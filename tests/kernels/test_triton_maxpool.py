"""The float MaxPool tactic (kernels/triton_maxpool.py) under TRITON_INTERPRET=1 on small CPU tensors. Oracle:
onnxruntime's MaxPool (one-node model, fp32 and fp16) — resnet stem 3×3/2 pad 1, 2×2/2, ceil_mode with a last
window past the edge, dilations, asymmetric pads, SAME_UPPER — on NCHW and channels-last inputs, exact equality;
NaN propagation; the refusals with their reasons; a check that fails when the kernel's window is off; and the
kernel compiled for sm_90 (a subprocess without the interpreter) for every dtype it serves."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from oracle import FLOAT, FLOAT16, ort_run, single_node_model
from tensorforge.ir import Layer
from tensorforge.kernels import triton_maxpool as tm

CPU = torch.device("cpu")
CFG = {"BLOCK_P": 16, "BLOCK_C": 4, "warps": 1}          # C = 5: two channel blocks, the second partly masked
SHAPE = (2, 5, 9, 11)
CASES = [dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
         dict(kernel_shape=[2, 2], strides=[2, 2]),
         dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),            # 9, 11: last window runs 1 past the edge
         dict(kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1], ceil_mode=1),     # … past the end pad
         dict(kernel_shape=[3, 3], dilations=[2, 2], pads=[2, 2, 2, 2]),
         dict(kernel_shape=[3, 2], strides=[1, 2], pads=[0, 1, 2, 0]),
         dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")]
_ONNX = {torch.float32: FLOAT, torch.float16: FLOAT16}


def _layer(outputs=("y",), **attrs):
    return Layer("p", "MaxPool", ["x"], list(outputs), dict(attrs))


def _ort(x: torch.Tensor, attrs: dict) -> np.ndarray:
    model = single_node_model("MaxPool", [("x", _ONNX[x.dtype], list(x.shape))], [("y", _ONNX[x.dtype], None)],
                              opset=17, **attrs)
    return ort_run(model, {"x": x.numpy()})["y"]


def _run(x, attrs, cfg=CFG):
    return tm.TritonMaxPool.build(_layer(**attrs), cfg, CPU)([x])[0]


@pytest.mark.parametrize("attrs", CASES, ids=[str(i) for i in range(len(CASES))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("channels_last", [False, True])
def test_matches_onnxruntime(attrs, dtype, channels_last):
    x = torch.randn(SHAPE, generator=torch.Generator().manual_seed(0)).to(dtype)
    want = _ort(x, attrs)
    xx = x.contiguous(memory_format=torch.channels_last) if channels_last else x
    got = _run(xx, attrs)
    assert got.dtype == dtype and tuple(got.shape) == want.shape
    assert got.is_contiguous(memory_format=torch.channels_last)
    np.testing.assert_array_equal(got.numpy(), want)                    # a max: exact


def test_ceil_mode_last_window_reads_only_real_taps():
    """All values negative: a tap past the edge read as 0 (not −∞) would win the last row/column."""
    x = -1 - torch.rand(1, 2, 9, 11, generator=torch.Generator().manual_seed(3))
    attrs = CASES[2]
    got = _run(x, attrs)
    assert tuple(got.shape) == (1, 2, 5, 6)
    np.testing.assert_array_equal(got.numpy(), _ort(x, attrs))
    assert (got < 0).all()


def test_nan_propagates_as_torch():
    x = torch.randn(1, 3, 6, 6)
    x[0, 1, 2, 3] = float("nan")
    got = _run(x, CASES[0])
    want = torch.nn.functional.max_pool2d(x, 3, 2, 1)
    assert torch.equal(got.isnan(), want.isnan()) and got.isnan().sum() > 0
    assert torch.equal(got.nan_to_num(0.0), want.nan_to_num(0.0))


def test_a_wrong_window_is_caught(monkeypatch):
    """The oracle comparison can fail: strides off by one, and a padding lower bound that is never applied."""
    x = torch.randn(SHAPE, generator=torch.Generator().manual_seed(1))
    attrs = CASES[0]
    want = _ort(x, attrs)
    wrong = tm.max_pool_2d(x, dict(attrs, strides=[3, 3]), CFG)
    assert wrong.shape != want.shape or not np.array_equal(wrong.numpy(), want)
    real = tm.window_geometry
    monkeypatch.setattr(tm, "window_geometry", lambda *a: (lambda o, b, e, x_: (o, [0] * len(b), e, x_))(*real(*a)))
    shifted = _run(x, attrs)
    assert shifted.shape == want.shape and not np.array_equal(shifted.numpy(), want)


def test_refusals_say_why():
    k3 = dict(kernel_shape=[3, 3])
    cuda = torch.device("cuda")
    assert "CUDA" in tm.TritonMaxPool.supports(_layer(**k3), CPU)
    assert tm.TritonMaxPool.supports(_layer(**k3), cuda) is None
    assert "2-D" in tm.TritonMaxPool.supports(_layer(kernel_shape=[3]), cuda)
    assert "2-D" in tm.TritonMaxPool.supports(_layer(kernel_shape=[3, 3, 3]), cuda)
    assert "Indices" in tm.TritonMaxPool.supports(_layer(outputs=("y", "i"), **k3), cuda)
    layer = _layer(**k3)
    assert "int8" in tm.TritonMaxPool.fits(layer, CFG, [torch.zeros(1, 2, 5, 5, dtype=torch.int8)])
    assert "4-D" in tm.TritonMaxPool.fits(layer, CFG, [torch.zeros(1, 2, 5)])
    assert tm.TritonMaxPool.fits(layer, CFG, [torch.zeros(1, 2, 5, 5, dtype=torch.bfloat16)]) is None
    with pytest.raises(ValueError, match="float16/bfloat16/float32"):
        tm.max_pool_float(torch.zeros(1, 2, 5, 5, dtype=torch.int8), k3)


def test_registered_beside_the_int8_tactic():
    from tensorforge.kernels import registry
    registry._load_optional()
    names = {t.name: t for t in registry._TACTICS["MaxPool"]}
    assert {"triton", "triton_int8"} <= set(names)
    assert names["triton"].priority < 0 and len(names["triton"].configs) <= 4


COMPILE = r'''
import json, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from tensorforge.kernels import triton_maxpool as tm
out = {}
names = "P C H W OH OW sxn sxc sxh sxw sh sw ph pw dh dw".split()
for dt, lo in (("fp16", float("-inf")), ("bf16", float("-inf")), ("fp32", float("-inf")), ("i8", -128), ("u8", 0)):
    cfg = tm.CONFIGS[2]
    consts = {"LO": lo, "KH": 3, "KW": 3, "BLOCK_P": cfg["BLOCK_P"], "BLOCK_C": cfg["BLOCK_C"]}
    sig = {"X": "*" + dt, "Y": "*" + dt, **{n: "i32" for n in names}, **{c: "constexpr" for c in consts}}
    k = triton.compile(ASTSource(fn=tm._maxpool_kernel, signature=sig, constexprs=consts),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": cfg["warps"]})
    out[dt] = len(k.asm["cubin"])
print("REPORT" + json.dumps(out))
'''


def test_kernel_compiles_for_sm90_in_every_dtype():
    pytest.importorskip("triton.backends.nvidia", reason="Triton's NVIDIA backend is not installed")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", COMPILE], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.split("REPORT", 1)[1])
    assert sorted(report) == ["bf16", "fp16", "fp32", "i8", "u8"] and all(v > 0 for v in report.values())
