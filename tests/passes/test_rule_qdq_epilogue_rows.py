"""A row reshape between a QuantizedMatMul and its epilogue (passes/rules/qdq_epilogue.py): GPT-2's Conv1D,
`addmm(b, x.view(-1, K), W).view(…, N)` → activation → `.view(-1, N)` → Q. The activation and the Q join the GEMM
and the reshape moves below it. Oracle: onnxruntime with graph optimisations disabled (every Q and DQ as written)."""

import numpy as np
import pytest

from fusion_helpers import build_logged, ops
from qdq_graphs import G, channel_scales, ort_exact, steps_off

RNG = np.random.RandomState(3)
OUT_STEP = 0.05


def _conv1d_graph(view_out=(2, 5, 24), flatten_again=True):
    """x (2, 5, 32) → Reshape(−1, 32) → Q/DQ → Gemm(W, b) → Reshape(view_out) → Relu → [Reshape(−1, 24)] → Q/DQ."""
    g = G()
    x = g.input("x", [2, 5, 32])
    w = RNG.randn(24, 32).astype(np.float32) * 0.2
    b = RNG.randn(24).astype(np.float32) * 0.1
    rows = g.node("Reshape", [x, g.const(np.array([-1, 32], np.int64))])
    xs = 0.03
    y = g.node("Gemm", [g.qdq(rows, xs, 0, np.int8), g.weight(w, 0), g.bias(b, xs, channel_scales(w, 0))],
               transB=1)
    y = g.node("Relu", [g.node("Reshape", [y, g.const(np.array(view_out, np.int64))])])
    if flatten_again:
        y = g.node("Reshape", [y, g.const(np.array([-1, 24], np.int64))])
    g.output(g.dq(g.q(y, OUT_STEP, -7, np.int8), OUT_STEP, -7, np.int8))
    return g.model()


def _exact(model):
    feeds = {"x": RNG.randn(2, 5, 32).astype(np.float32)}
    engine, log = build_logged(model)
    got, want = engine.run(dict(feeds)), ort_exact(model, feeds)
    for name, w in want.items():
        off = steps_off(got[name], w, OUT_STEP)
        assert np.abs(w).max() > 10 * OUT_STEP                      # not a constant output
        assert off.max() <= 1 + 1e-5 and (off < 1e-5).mean() >= 0.98, (off.max(), (off < 1e-5).mean())
    return engine, log


@pytest.mark.parametrize("flatten_again", [False, True])
def test_relu_and_q_after_a_row_reshape_join_the_gemm(flatten_again):
    engine, _ = _exact(_conv1d_graph(flatten_again=flatten_again))
    gemm = [la for la in engine.data.layers if la.op == "QuantizedMatMul"]
    assert len(gemm) == 1 and gemm[0].attrs["activation"] == "Relu" and gemm[0].attrs["y_dtype"] == "int8"
    assert not {"Relu", "PointwiseChain"} & set(ops(engine)), ops(engine)
    assert ops(engine).count("QuantizeLinear") == 1                 # the network input's, before the GEMM
    # the reshape moved below the fused GEMM, and from there (qgemm_rows.py) into the shape of the GEMM's x: the
    # GEMM writes the output's shape itself and the output's DQ reads it
    after = [la for la in engine.data.layers if gemm[0].outputs[0] in la.inputs]
    assert [la.op for la in after] == ["DequantizeLinear"]
    rows = next(la for la in engine.data.layers if gemm[0].inputs[0] in la.outputs)
    assert rows.op == "Reshape" and engine.data.constants[rows.inputs[1]].tolist() == ([-1, 32] if flatten_again
                                                                                      else [2, 5, 32])


def test_a_reshape_that_splits_the_last_axis_stays_between():
    engine, log = _exact(_conv1d_graph(view_out=(2, 5, 4, 6), flatten_again=False))
    gemm = [la for la in engine.data.layers if la.op == "QuantizedMatMul"]
    assert len(gemm) == 1 and gemm[0].attrs["activation"] == "none"
    assert "changes the last axis" in log


def test_a_second_reshape_that_copies_input_dims_is_not_moved():
    """rows2 = Reshape([0, 3, 2, 24]) copies dim 0 from its input; below the fused GEMM its input would be the (M, N)
    rows, so the Q stays a layer of its own (reason logged) and the numerics still follow the exact Q/DQ."""
    g = G()
    x = g.input("x", [2, 6, 32])
    w = RNG.randn(24, 32).astype(np.float32) * 0.2
    rows = g.node("Reshape", [x, g.const(np.array([-1, 32], np.int64))])
    y = g.node("Gemm", [g.qdq(rows, 0.03, 0, np.int8), g.weight(w, 0)], transB=1)
    y = g.node("Relu", [g.node("Reshape", [y, g.const(np.array([2, 6, 24], np.int64))])])
    y = g.node("Reshape", [y, g.const(np.array([0, 3, 2, 24], np.int64))])
    g.output(g.dq(g.q(y, OUT_STEP, -7, np.int8), OUT_STEP, -7, np.int8))
    model = g.model()
    feeds = {"x": RNG.randn(2, 6, 32).astype(np.float32)}
    engine, log = build_logged(model)
    got, want = engine.run(dict(feeds)), ort_exact(model, feeds)
    for name, w_ in want.items():
        off = steps_off(got[name], w_, OUT_STEP)
        assert off.max() <= 1 + 1e-5 and (off < 1e-5).mean() >= 0.98
    assert "copies input dimensions" in log
