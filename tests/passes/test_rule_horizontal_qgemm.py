"""Horizontal fusion of quantized GEMMs: three QuantizedMatMuls reading one quantized input (Q/K/V of an INT8
transformer) become one wide QuantizedMatMul + Split — every output bit for bit the unfused build's (int32 sums
per column, per-column epilogue), and within onnxruntime's exact Q/DQ evaluation; a sibling with another
activation stays apart, with its reason."""

import numpy as np
from onnx import TensorProto

import tensorforge as tfg
from fusion_helpers import build_logged
from qdq_graphs import G, ort_exact
from tensorforge.passes import pipeline

X_SCALE, X_ZP = 0.02, 128


def _qkv(relu_on_last=False) -> bytes:
    r = np.random.RandomState(0)
    g = G()
    x = g.input("x", [2, 5, 16])
    xq = g.qdq(x, X_SCALE, X_ZP)
    for j, n in enumerate((8, 12, 8)):
        y = g.node("MatMul", [xq, g.weight(r.randn(16, n) * 0.3, axis=1)])
        y = g.node("Add", [y, g.const((r.randn(n) * 0.1).astype(np.float32))])
        if relu_on_last and j == 2:
            y = g.node("Relu", [y])
        g.output(y)
    return g.model()


def _feeds(seed=1):
    return {"x": (np.random.RandomState(seed).randn(2, 5, 16) * 0.8).astype(np.float32)}


def _unfused(model, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(pipeline, "PASSES", [p for p in pipeline.PASSES if p[0] != "horizontal-gemm"])
        return tfg.build(model, device="cpu")


def test_three_quantized_projections_become_one(monkeypatch):
    model, feeds = _qkv(), _feeds()
    engine, _ = build_logged(model)
    ops = [la.op for la in engine.data.layers]
    assert ops.count("QuantizedMatMul") == 1 and ops.count("Split") == 1, ops
    wide = next(la for la in engine.data.layers if la.op == "QuantizedMatMul")
    assert tuple(engine.data.constants[wide.inputs[1]].shape) == (28, 16) and len(wide.attrs["w_scale"]) == 28
    plain = _unfused(model, monkeypatch)
    assert [la.op for la in plain.data.layers].count("QuantizedMatMul") == 3
    got, ref, exact = engine.run(dict(feeds)), plain.run(dict(feeds)), ort_exact(model, feeds)
    for name in exact:
        np.testing.assert_array_equal(np.asarray(got[name]), np.asarray(ref[name]))
        np.testing.assert_allclose(np.asarray(got[name]), exact[name], rtol=1e-4, atol=1e-5)
        assert np.std(exact[name]) > 0.05


def test_a_sibling_with_another_activation_stays_apart(monkeypatch):
    model, feeds = _qkv(relu_on_last=True), _feeds(2)
    engine, text = build_logged(model)
    ops = [la.op for la in engine.data.layers]
    assert ops.count("QuantizedMatMul") == 2 and ops.count("Split") == 1, ops
    assert "its activation differ" in text
    got, exact = engine.run(dict(feeds)), ort_exact(model, feeds)
    for name in exact:
        np.testing.assert_allclose(np.asarray(got[name]), exact[name], rtol=1e-4, atol=1e-5)
