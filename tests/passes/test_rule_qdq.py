"""Q/DQ fusion (passes/rules/qdq.py): the fused-op count, numerics before ≡ after (onnxruntime with graph
optimisations disabled evaluates every Q and DQ as written: the exact semantics) within one quantization step,
and the recorded reason and build-log line on negative cases (the Q/DQ pair then runs as written)."""

import numpy as np
import pytest
import torch

import tensorforge as tfg
from fusion_helpers import build_logged, ops
from qdq_graphs import G, channel_scales, ort_exact, steps_off


def onnx_inputs(model: bytes):
    import onnx
    return onnx.load_from_string(model).graph.input

RNG = np.random.RandomState(0)


def _conv_graph(relu=True, residual=False, x_dtype=np.uint8, out_q=True, pads=(1, 1, 1, 1), stride=1):
    g = G()
    x = g.input("x", [2, 8, 9, 9])
    w = RNG.randn(16, 8, 3, 3).astype(np.float32) * 0.2
    b = RNG.randn(16).astype(np.float32) * 0.1
    xs, xz = 0.02, (128 if x_dtype == np.uint8 else 3)
    xd = g.qdq(x, xs, xz, x_dtype)
    y = g.node("Conv", [xd, g.weight(w, 0), g.bias(b, xs, channel_scales(w, 0))], pads=list(pads),
               strides=[stride, stride], kernel_shape=[3, 3])
    if residual:
        y = g.qdq(y, 0.05, 0, np.int8)
        r = g.qdq(g.input("r", [2, 16, 9, 9]), 0.03, -2, np.int8)
        y = g.node("Add", [y, r])
    if relu:
        y = g.node("Relu", [y])
    if out_q:
        y = g.dq(g.q(y, 0.04, 5, np.int8), 0.04, 5, np.int8)
    g.output(y)
    return g.model(), y


def _feeds(model, **shapes):
    return {k: RNG.randn(*s).astype(np.float32) for k, s in shapes.items()}


def _check_exact(model, feeds, step, min_exact=0.98):
    """Every output within one step of the exact Q/DQ result, and most of them equal to it."""
    engine, log = build_logged(model)
    got = engine.run(dict(feeds))
    want = ort_exact(model, feeds)
    for name, w in want.items():
        off = steps_off(got[name], w, step)
        assert off.max() <= 1 + 1e-5, f"{name}: {off.max()} steps from the exact result"
        assert (off < 1e-5).mean() >= min_exact, f"{name}: only {(off < 1e-5).mean():.3f} exact"
    return engine, log


def test_conv_bias_relu_q_is_one_quantized_conv():
    model, _ = _conv_graph()
    engine, _ = _check_exact(model, _feeds(model, x=(2, 8, 9, 9)), 0.04)
    assert ops(engine).count("QuantizedConv") == 1
    assert "Conv" not in ops(engine) and ops(engine).count("QuantizeLinear") == 1   # the input's Q stays
    layer = next(x for x in engine.data.layers if x.op == "QuantizedConv")
    assert layer.attrs["activation"] == "Relu" and layer.attrs["y_dtype"] == "int8" and layer.attrs["x_dtype"] == "uint8"
    assert len(layer.attrs["w_scale"]) == 16
    w = engine.data.constants[layer.inputs[1]]
    assert w.dtype == torch.int8                       # weights stored quantized in the engine


def test_residual_add_with_the_convs_own_qdq_is_fused():
    model, _ = _conv_graph(residual=True, x_dtype=np.int8, stride=1)
    feeds = _feeds(model, x=(2, 8, 9, 9), r=(2, 16, 9, 9))
    engine, _ = _check_exact(model, feeds, 0.04)
    layer = next(x for x in engine.data.layers if x.op == "QuantizedConv")
    assert layer.attrs["mid_scale"] == pytest.approx(0.05) and layer.attrs["residual_scale"] == pytest.approx(0.03)
    assert len(layer.inputs) == 4 and ops(engine).count("QuantizedConv") == 1


def test_float_output_when_no_q_follows():
    model, _ = _conv_graph(relu=True, out_q=False)
    feeds = _feeds(model, x=(2, 8, 9, 9))
    engine, _ = build_logged(model)
    layer = next(x for x in engine.data.layers if x.op == "QuantizedConv")
    assert layer.attrs["y_dtype"] == "float32" and layer.attrs["y_scale"] == 0
    got, want = engine.run(dict(feeds)), ort_exact(model, feeds)
    for k in want:      # float output: int32 accumulation is exact, the float graph rounds in float32
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-5)


def _matmul_graph(gemm=False, act=None, x_dtype=np.uint8):
    g = G()
    x = g.input("x", [2, 5, 32] if not gemm else [6, 32])
    w = RNG.randn(32, 24).astype(np.float32) * 0.2
    b = RNG.randn(24).astype(np.float32) * 0.1
    xd = g.qdq(x, 0.03, 120 if x_dtype == np.uint8 else -4, x_dtype)
    if gemm:
        y = g.node("Gemm", [xd, g.weight(w.T.copy(), 0), g.const(b)], transB=1, alpha=0.5, beta=2.0)
    else:
        y = g.node("MatMul", [xd, g.weight(w, 1)])
        y = g.qdq(y, 0.05, 3, np.int8)                 # onnxruntime quantizes the bias Add on its own
        y = g.node("Add", [y, g.dq(g.const(np.round(b / 0.01).astype(np.int8)), 0.01, 0, np.int8)])
    if act:
        y = g.node(act, [y])
    y = g.dq(g.q(y, 0.05, -7, np.int8), 0.05, -7, np.int8)
    g.output(y)
    return g.model()


@pytest.mark.parametrize("gemm,act", [(False, None), (True, "Relu"), (False, "Relu")])
def test_matmul_and_gemm_become_quantized_matmul(gemm, act):
    model = _matmul_graph(gemm, act)
    engine, _ = _check_exact(model, _feeds(model, x=(6, 32) if gemm else (2, 5, 32)), 0.05)
    assert ops(engine).count("QuantizedMatMul") == 1 and "MatMul" not in ops(engine) and "Gemm" not in ops(engine)
    layer = next(x for x in engine.data.layers if x.op == "QuantizedMatMul")
    assert engine.data.constants[layer.inputs[1]].shape == (24, 32)       # stored (N, K)
    if not gemm:
        assert len(layer.inputs) == 5 and layer.attrs["mid_scale"] == pytest.approx(0.05)  # the post-Q bias


def test_fake_quant_weights_q_of_float_constant():
    g = G()
    x = g.input("x", [4, 16])
    w = RNG.randn(16, 8).astype(np.float32)
    s = channel_scales(w, 1)
    wq = g.node("QuantizeLinear", [g.const(w), g.const(s), g.const(np.zeros(8, np.int8))], axis=1)
    wd = g.node("DequantizeLinear", [wq, g.const(s), g.const(np.zeros(8, np.int8))], axis=1)
    y = g.node("MatMul", [g.qdq(x, 0.05, 0, np.int8), wd])
    g.output(g.dq(g.q(y, 0.1, 0, np.int8), 0.1, 0, np.int8))
    model = g.model()
    engine, _ = _check_exact(model, _feeds(model, x=(4, 16)), 0.1)
    layer = next(x for x in engine.data.layers if x.op == "QuantizedMatMul")
    assert engine.data.constants[layer.inputs[1]].dtype == torch.int8


def test_conv_transpose():
    g = G()
    x = g.input("x", [1, 4, 5, 5])
    w = RNG.randn(4, 6, 3, 3).astype(np.float32) * 0.3
    y = g.node("ConvTranspose", [g.qdq(x, 0.02, 128), g.weight(w, 1)], strides=[2, 2], pads=[1, 1, 1, 1])
    g.output(g.dq(g.q(y, 0.03, 128), 0.03, 128))
    model = g.model()
    engine, _ = _check_exact(model, _feeds(model, x=(1, 4, 5, 5)), 0.03)
    assert ops(engine).count("QuantizedConvTranspose") == 1


# ---- negative cases: the reason is recorded, the Q/DQ layers run as written (a log line says so) -------------

def test_per_axis_activation_scale_is_not_fused():
    g = G()
    x = g.input("x", [2, 4, 6, 6])
    xq = g.node("QuantizeLinear", [x, g.const(np.full(4, 0.02, np.float32)), g.const(np.zeros(4, np.int8))], axis=1)
    xd = g.node("DequantizeLinear", [xq, g.const(np.full(4, 0.02, np.float32)), g.const(np.zeros(4, np.int8))],
                axis=1)
    y = g.node("Conv", [xd, g.weight(RNG.randn(8, 4, 1, 1), 0)])
    g.output(g.dq(g.q(y, 0.05, 0, np.int8), 0.05, 0, np.int8))
    model = g.model()
    engine, log = _check_exact(model, _feeds(model, x=(2, 4, 6, 6)), 0.05, min_exact=1.0)
    assert "QuantizedConv" not in ops(engine)
    assert "quantized per axis" in log
    assert "runs as written" in log


def test_computed_weights_are_not_fused():
    g = G()
    a, b = g.input("a", [3, 8]), g.input("b", [8, 5])
    y = g.node("MatMul", [g.qdq(a, 0.05, 0, np.int8), g.qdq(b, 0.05, 0, np.int8)])
    g.output(g.dq(g.q(y, 0.1, 0, np.int8), 0.1, 0, np.int8))
    model = g.model()
    engine, log = _check_exact(model, _feeds(model, a=(3, 8), b=(8, 5)), 0.1, min_exact=1.0)
    assert "QuantizedMatMul" not in ops(engine)
    assert "are computed at run time" in log
    assert ops(engine).count("QuantizeLinear") >= 1 and ops(engine).count("DequantizeLinear") >= 1


def test_blocked_weights_are_not_an_int8_gemm_but_weight_only():
    """Blocked weight scales: not the int8 GEMM (the reason is recorded), but the weight-only op (qdq_int4)."""
    g = G(opset=21)
    x = g.input("x", [2, 8])
    w = RNG.randint(-7, 8, (8, 4)).astype(np.int8)
    s = np.full((2, 4), 0.1, np.float32)
    wd = g.node("DequantizeLinear", [g.const(w), g.const(s)], axis=0, block_size=4)
    y = g.node("MatMul", [g.qdq(x, 0.05, 0, np.int8), wd])
    g.output(g.dq(g.q(y, 0.1, 0, np.int8), 0.1, 0, np.int8))
    model = g.model()
    engine, log = _check_exact(model, _feeds(model, x=(2, 8)), 0.1, min_exact=1.0)
    assert "QuantizedMatMul" not in ops(engine) and ops(engine).count("BlockQuantizedMatMul") == 1
    assert "is blocked (block_size=4)" in log


def test_quantized_ops_survive_an_engine_round_trip(tmp_path):
    model, _ = _conv_graph(residual=True, x_dtype=np.int8)
    feeds = _feeds(model, x=(2, 8, 9, 9), r=(2, 16, 9, 9))
    engine = tfg.build(model, device="cpu")
    path = tmp_path / "q.engine"
    engine.save(str(path))
    again = tfg.load(str(path), device="cpu")
    a, b = engine.run(dict(feeds)), again.run(dict(feeds))
    for k in a:
        np.testing.assert_array_equal(np.asarray(a[k]), np.asarray(b[k]))
    layer = next(x for x in again.data.layers if x.op == "QuantizedConv")
    assert again.data.constants[layer.inputs[1]].dtype == torch.int8


def test_implicit_int8_qdq_layers_fuse_the_same_way():
    """The contract with implicit INT8 (builder/calibration/qdq_insert.py): the IR Q/DQ layers it inserts from
    calibrated ranges become the same quantized ops; fused ≡ the inserted Q/DQ run as written (level 0)."""
    from tensorforge.api.high_level import Engine
    from tensorforge.builder import BuilderConfig, build_engine
    from tensorforge.builder.calibration.qdq_insert import insert_qdq
    from tensorforge.parser import parse_model
    g = G()
    x = g.input("x", [2, 8, 9, 9])
    w1, w2 = (RNG.randn(8, 8, 3, 3) * 0.2).astype(np.float32), (RNG.randn(8, 8, 1, 1) * 0.3).astype(np.float32)
    h = g.node("Relu", [g.node("Conv", [x, g.const(w1), g.const(np.zeros(8, np.float32))], pads=[1, 1, 1, 1])])
    y = g.node("Relu", [g.node("Add", [g.node("Conv", [h, g.const(w2)]), h])])     # h: quantized and float
    g.output(y)
    model = g.model()
    feeds = _feeds(model, x=(2, 8, 9, 9))
    engines = []
    for level in (0, 3):
        net = parse_model(model)
        report = insert_qdq(net, {name: 4.0 for name in net.tensors}, "int8")
        assert len(report.layers) == 2
        engines.append(Engine(build_engine(net, BuilderConfig(device="cpu", optimization_level=level)), "cpu"))
    plain, fused = engines
    fused_ops = [la.op for la in fused.data.layers]
    assert fused_ops.count("QuantizedConv") == 2
    assert fused_ops.count("QuantizeLinear") == 1         # the input's; h's Q is conv1's second output (qdq_dual)
    first = next(la for la in fused.data.layers if la.op == "QuantizedConv")
    assert len(first.outputs) == 2 and first.attrs["out2_dtype"] == "int8"
    assert first.attrs["kernel_shape"] == [3, 3] and first.tactic.startswith("quantizedconv.torch_int_mm")
    a, b = plain.run(dict(feeds)), fused.run(dict(feeds))
    step = 4.0 / 127
    for k in a:      # a float output: the int32 sum is exact, the unfused float conv rounds — far below a step
        assert steps_off(b[k], a[k], step).max() < 1e-3


def test_scales_and_weights_routed_through_identity_still_fuse():
    g = G()
    x = g.input("x", [4, 16])
    w = (RNG.randn(16, 8) * 0.3).astype(np.float32)
    s = channel_scales(w, 1)
    wq = np.clip(np.round(w / s), -127, 127).astype(np.int8)
    w_id = g.node("Identity", [g.const(wq)])
    s_id = g.node("Identity", [g.const(s)])
    wd = g.node("DequantizeLinear", [w_id, s_id, g.const(np.zeros(8, np.int8))], axis=1)
    xs = g.node("Identity", [g.const(np.float32(0.05))])
    xd = g.node("DequantizeLinear", [g.node("QuantizeLinear", [x, xs, g.const(np.int8(0))]), xs,
                                     g.const(np.int8(0))])
    y = g.node("MatMul", [xd, wd])
    g.output(g.dq(g.q(y, 0.1, 0, np.int8), 0.1, 0, np.int8))
    model = g.model()
    engine, _ = _check_exact(model, _feeds(model, x=(4, 16)), 0.1)
    assert ops(engine).count("QuantizedMatMul") == 1


def test_gelu_found_after_fuse_gelu_joins_the_quantized_matmul():
    """Implicit INT8 on Linear → GELU (exported as an Erf chain) → Linear: fuse-qdq fuses MatMul + bias; once
    fuse-gelu has made the chain one Gelu op, qdq_epilogue moves the Gelu and the next Q into the same op."""
    from tensorforge.api.high_level import Engine
    from tensorforge.builder import BuilderConfig, build_engine
    from tensorforge.builder.calibration.qdq_insert import insert_qdq
    from tensorforge.parser import parse_model
    from fusion_helpers import export_quiet

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 16)).eval()
    model = export_quiet(mlp, (torch.randn(2, 5, 32),), opset=17)
    names = [i.name for i in onnx_inputs(model)]
    feeds = {names[0]: RNG.randn(2, 5, 32).astype(np.float32)}
    engines = []
    for level in (0, 3):
        net = parse_model(model)
        insert_qdq(net, {name: 3.0 for name in net.tensors}, "int8")
        engines.append(Engine(build_engine(net, BuilderConfig(device="cpu", optimization_level=level)), "cpu"))
    plain, fused = engines
    layers = [la for la in fused.data.layers if la.op == "QuantizedMatMul"]
    assert len(layers) == 2 and "Erf" not in [la.op for la in fused.data.layers]
    assert layers[0].attrs["activation"] == "Gelu" and layers[0].attrs["y_dtype"] == "int8"
    a, b = plain.run(dict(feeds)), fused.run(dict(feeds))
    for k in a:     # one int8 step of the hidden layer moves the output by at most |w|·3/127 per flipped element
        off = np.abs(np.asarray(b[k]) - np.asarray(a[k]))
        assert off.max() < 0.05 and (off < 1e-4).mean() > 0.9, (off.max(), (off < 1e-4).mean())
