"""quantize-before-views (passes/rules/qdq_hoist.py): a per-tensor QuantizeLinear below Reshape/Transpose moves above
them, so it meets its producer and fuses there (ViT's LayerNorm → Transpose → Q before the QKV GEMM becomes one
LayerNormalizationQuantize). Oracle: onnxruntime with graph optimisations off (every Q/DQ as written); the unfused
build (optimisation level 0) must give the same codes. Negative cases: a view read elsewhere, a per-axis Q."""

import numpy as np
import pytest

from fusion_helpers import build_logged, ops
from qdq_graphs import G, check_codes_against_exact

RNG = np.random.RandomState(11)


def _ln_view_q(views=("Transpose",), per_axis=False, float_reader=False):
    """x (2, 6, 32) → LayerNorm → y → views → Q → DQ → MatMul(int8 weights) → Q → DQ → z."""
    g = G(opset=17)
    x = g.input("x", [2, 6, 32])
    t = g.node("LayerNormalization", [x, g.const((RNG.rand(32) + 0.5).astype(np.float32)),
                                      g.const((RNG.randn(32) * 0.1).astype(np.float32))], axis=-1, epsilon=1e-5)
    for v in views:
        if v == "Transpose":
            t = g.node("Transpose", [t], perm=[1, 0, 2])                      # (6, 2, 32)
        else:
            t = g.node("Reshape", [t, g.const(np.array([12, 32], np.int64))])
    if per_axis:
        s = (RNG.rand(32) * 0.02 + 0.02).astype(np.float32)
        tq = g.node("QuantizeLinear", [t, g.const(s), g.const(np.zeros(32, np.int8))], axis=-1)
        td = g.node("DequantizeLinear", [tq, g.const(s), g.const(np.zeros(32, np.int8))], axis=-1)
    else:
        td = g.qdq(t, 0.03, 0, np.int8)
    z = g.node("MatMul", [td, g.weight(RNG.randn(32, 24).astype(np.float32) * 0.2, 1)])
    z = g.dq(g.q(z, 0.05, 0, np.int8), 0.05, 0, np.int8)
    g.output(z)
    if float_reader:
        g.output(g.node("Relu", [t]))
    return g.model(), z


def _check_against_exact(model, z, engine):
    check_codes_against_exact(model, engine, {"x": RNG.randn(2, 6, 32).astype(np.float32)}, z, 0.05, 0.98, 0.5)


@pytest.mark.parametrize("views", [("Transpose",), ("Transpose", "Reshape")])
def test_q_climbs_the_views_and_fuses_into_the_layernorm(views):
    model, z = _ln_view_q(views)
    engine, log = build_logged(model)
    names = ops(engine)
    assert "QuantizeLinear" not in names and "LayerNormalization" not in names
    assert names.count("LayerNormalizationQuantize") == 1
    lnq = names.index("LayerNormalizationQuantize")
    assert all(names.index(v) > lnq for v in views)          # the views now move the int8 codes
    layers = engine.data.layers
    for la in layers:
        if la.op in views:
            assert engine.data.tensors[la.outputs[0]].dtype.itemsize == 1
    _check_against_exact(model, z, engine)


def test_a_view_read_elsewhere_keeps_its_q_with_the_reason():
    model, z = _ln_view_q(float_reader=True)
    engine, log = build_logged(model)
    assert "QuantizeLinear" in ops(engine) and "LayerNormalizationQuantize" not in ops(engine)
    assert "also read elsewhere" in log
    _check_against_exact(model, z, engine)


def test_a_per_axis_q_stays_below_the_view():
    model, z = _ln_view_q(per_axis=True)
    engine, log = build_logged(model)
    names = ops(engine)
    assert names.index("Transpose") < names.index("QuantizeLinear")
    assert "per axis" in log
