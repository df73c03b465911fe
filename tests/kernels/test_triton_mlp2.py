"""TwoLayerMLP in one Triton launch (kernels/triton_mlp2.py) under TRITON_INTERPRET=1, against onnxruntime running
MatMul → Add(b1) → act1 → MatMul → Add(b2) → act2 in float32 on the same values (the hidden product rounded to half
between the two when the operands are half, as the unfused half layer stores it): both weight layouts, an absent
first bias, partial hidden/channel/output tiles, several programs per row. Also: the tactic's reasons and the
pair tactics derived from every MatMulEpilogue tactic."""

import numpy as np
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper

from tensorforge.ir import Layer
from tensorforge.kernels.triton_mlp2 import CONFIGS, TritonMlp2, mlp2

# the kernel's activation (name, alpha, beta) → the ONNX nodes after input `x` ending in output `y`
ACTS = {"Relu": lambda x, y: [helper.make_node("Relu", [x], [y])],
        "Silu": lambda x, y: [helper.make_node("Sigmoid", [x], [y + "_s"]), helper.make_node("Mul", [x, y + "_s"], [y])],
        "HardSigmoid": lambda x, y: [helper.make_node("HardSigmoid", [x], [y], alpha=1 / 6, beta=0.5)],
        "Sigmoid": lambda x, y: [helper.make_node("Sigmoid", [x], [y])]}


def oracle(a, w1, b1, w2, b2, act1, act2) -> np.ndarray:
    """w1 (H, C), w2 (O, H): y = act2(act1(a·w1ᵀ + b1)·w2ᵀ + b2) by onnxruntime in float32."""
    f32 = lambda t: t.detach().to(torch.float32).numpy()
    feeds = {"A": f32(a), "W1": np.ascontiguousarray(f32(w1).T), "W2": np.ascontiguousarray(f32(w2).T),
             "B2": f32(b2)}
    nodes, h = [helper.make_node("MatMul", ["A", "W1"], ["p1"])], "p1"
    if b1 is not None:
        feeds["B1"] = f32(b1)
        nodes.append(helper.make_node("Add", [h, "B1"], ["q1"]))
        h = "q1"
    nodes += ACTS[act1](h, "h")
    h = "h"
    if a.dtype == torch.float16:
        nodes += [helper.make_node("Cast", ["h"], ["h16"], to=TensorProto.FLOAT16),
                  helper.make_node("Cast", ["h16"], ["h32"], to=TensorProto.FLOAT)]
        h = "h32"
    nodes += [helper.make_node("MatMul", [h, "W2"], ["p2"]), helper.make_node("Add", ["p2", "B2"], ["q2"])]
    nodes += ACTS[act2]("q2", "Y")
    inputs = [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in feeds.items()]
    graph = helper.make_graph(nodes, "mlp2", inputs, [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(["Y"], feeds)[0].astype(np.float64)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("trans_b1,trans_b2", [(1, 1), (0, 0), (1, 0)])
@pytest.mark.parametrize("rows,first_bias,acts", [(1, True, ("Silu", "Sigmoid")), (3, False, ("Relu", "HardSigmoid"))])
@pytest.mark.parametrize("cfg", [{"BO": 32, "warps": 4}, CONFIGS[0]], ids=["BO32", "BO64"])   # 32: slices < 70
def test_mlp2_matches_onnxruntime(dtype, trans_b1, trans_b2, rows, first_bias, acts, cfg):
    g = torch.Generator().manual_seed(4)
    c, hidden, out = 50, 20, 70           # partial chunks everywhere; out 70: several programs per row
    a = torch.randn(rows, c, generator=g).to(dtype)
    w1 = (torch.randn(hidden, c, generator=g) * 0.3).to(dtype)
    w2 = (torch.randn(out, hidden, generator=g) * 0.3).to(dtype)
    b1 = torch.randn(hidden, generator=g).to(dtype) if first_bias else None
    b2 = torch.randn(out, generator=g).to(dtype)
    hs = {"alpha2": 1 / 6, "beta2": 0.5} if acts[1] == "HardSigmoid" else {}
    got = mlp2(a, w1 if trans_b1 else w1.t().contiguous(), b1, w2 if trans_b2 else w2.t().contiguous(), b2,
               trans_b1, trans_b2, act1=acts[0], act2=acts[1], cfg=cfg, **hs)
    want = oracle(a, w1, b1, w2, b2, *acts)
    assert got.shape == (rows, out) and got.dtype == dtype
    err = np.abs(got.float().numpy() - want)
    tol = 2e-3 if dtype == torch.float16 else 1e-5
    assert (err <= tol * np.abs(want) + tol).all(), err.max()
    assert 0.05 < want.mean() < 0.95 and want.std() > 0.05       # outputs spread over the gate's range


def test_tactic_reasons():
    layer = Layer("m", "TwoLayerMLP", ["a", "w1", "b1", "w2", "b2"], ["y"], {"trans_b1": 1, "trans_b2": 1})
    a, w1 = torch.randn(2, 64).half(), torch.randn(16, 64).half()
    assert TritonMlp2.fits(layer, CONFIGS[0], [a, w1]) is None
    assert "hidden width 300 > 256" in TritonMlp2.fits(layer, CONFIGS[0], [a, torch.randn(300, 64).half()])
    assert "rows > 256" in TritonMlp2.fits(layer, CONFIGS[0], [torch.randn(512, 64).half(), w1])
    assert "Triton kernels run on CUDA" in TritonMlp2.supports(layer, torch.device("cpu"))
    bad = Layer("m", "TwoLayerMLP", ["a", "w1", "b1", "w2", "b2"], ["y"], {"activation2": "Softplus"})
    assert "no Triton epilogue" in TritonMlp2.supports(bad, torch.device("cuda"))


def test_every_matmul_epilogue_tactic_has_its_pair():
    from tensorforge.kernels import registry
    registry._load_optional()
    single = {t.name for t in registry.registered("MatMulEpilogue")}
    fused = {t.name for t in registry.registered("TwoLayerMLP")}
    assert single and {"pair_" + n for n in single} <= fused and "triton_mlp2" in fused


ON_CUDA = r'''
import torch
import torch.nn.functional as F
from tensorforge.kernels.triton_mlp2 import CONFIGS, mlp2
for rows, c, hidden in ((1, 1152, 48), (32, 672, 168), (1, 960, 240), (32, 96, 4)):
    a = torch.rand(rows, c, device="cuda").half()
    w1, b1 = (torch.randn(hidden, c, device="cuda") * 0.05).half(), torch.randn(hidden, device="cuda").half()
    w2, b2 = (torch.randn(c, hidden, device="cuda") * 0.1).half(), torch.randn(c, device="cuda").half()
    h = F.silu(F.linear(a.float(), w1.float(), b1.float())).half().float()
    want = torch.sigmoid(F.linear(h, w2.float(), b2.float()))
    for cfg in CONFIGS:
        got = mlp2(a, w1, b1, w2, b2, 1, 1, act1="Silu", act2="Sigmoid", cfg=cfg)
        torch.testing.assert_close(got.float(), want, rtol=2e-3, atol=2e-3)
print("OK")
'''


def test_mlp2_on_cuda_at_squeeze_excite_shapes():
    """The compiled kernel on a GPU (skips without CUDA; a subprocess without TRITON_INTERPRET): EfficientNet-B0's
    and MobileNetV3's squeeze-excite widths at batch 1 and 32, every config, against torch in float32."""
    import os
    import subprocess
    import sys
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", ON_CUDA], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr[-3000:]
