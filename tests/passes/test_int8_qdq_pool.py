"""MaxPool on int8 codes (passes/rules/qdq_pool.py): Q(MaxPool(y)) ⇒ MaxPool(Q(y)) with the Q in the producing
quantized conv's epilogue (implicit-INT8 / ModelOpt form), and DQ → MaxPool → Q with one scale ⇒ MaxPool on the
codes (onnxruntime's QDQ form). Oracle: onnxruntime with graph optimisations disabled (every Q and DQ as written).
Checked: the layers (no Q/DQ layer left between the convs, the pool reads the conv's int8/uint8 output), outputs
within one step of the exact result, the rejection reasons where it must not fire, and a deliberately broken
rewrite (a zero point off by 3) failing the same check."""

import numpy as np
import pytest

from fusion_helpers import build_logged
from qdq_graphs import G, channel_scales, ort_exact, steps_off
from tensorforge.passes.rules import qdq_pool

RNG = np.random.RandomState(7)
POOL = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])


def _graph(form: str, extra_reader=False, pool_scale=None):
    """x → Q/DQ → Conv+bias → Relu → [Q/DQ] → MaxPool → Q/DQ → Conv+bias → Q/DQ → y.
    form "q_after": no Q/DQ between Relu and MaxPool (the Q follows the pool: implicit INT8 / ModelOpt);
    form "dq_before": onnxruntime's Q/DQ on both sides of the pool (scale `pool_scale` after it, default the same)."""
    g = G()
    x = g.input("x", [2, 4, 12, 12])
    dt = np.int8 if form == "q_after" else np.uint8
    xs, xz = 0.03, (0 if dt == np.int8 else 128)
    w1 = RNG.randn(8, 4, 3, 3).astype(np.float32) * 0.3
    b1 = RNG.randn(8).astype(np.float32) * 0.1
    y = g.node("Conv", [g.qdq(x, xs, xz, dt), g.weight(w1, 0), g.bias(b1, xs, channel_scales(w1, 0))],
               pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    y = g.node("Relu", [y])
    ps, pz = 0.05, (0 if dt == np.int8 else 3)
    if form == "dq_before":
        y = g.qdq(y, ps, pz, dt)
    p = g.node("MaxPool", [y], **POOL)
    if extra_reader:
        g.output(p)
    pq = g.qdq(p, pool_scale or ps, pz, dt)
    w2 = RNG.randn(6, 8, 3, 3).astype(np.float32) * 0.2
    b2 = RNG.randn(6).astype(np.float32) * 0.1
    z = g.node("Conv", [pq, g.weight(w2, 0), g.bias(b2, pool_scale or ps, channel_scales(w2, 0))],
               pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    out = g.qdq(z, 0.04, 0 if dt == np.int8 else 120, dt)
    g.output(out)
    return g.model(), out


def _run(model):
    feeds = {"x": RNG.randn(2, 4, 12, 12).astype(np.float32)}
    engine, log = build_logged(model)
    return engine, log, engine.run(dict(feeds)), ort_exact(model, feeds)


def _layers(engine):
    return {la.op: la for la in engine.data.layers}, [la.op for la in engine.data.layers]


@pytest.mark.parametrize("form", ["q_after", "dq_before"])
def test_maxpool_runs_on_the_conv_codes(form):
    model, out = _graph(form)
    engine, _, got, want = _run(model)
    by_op, ops = _layers(engine)
    assert ops.count("QuantizedConv") == 2 and "MaxPool" in ops, ops
    assert ops == ["QuantizeLinear", "QuantizedConv", "MaxPool", "QuantizedConv", "DequantizeLinear"], ops
    pool, conv1 = by_op["MaxPool"], engine.data.layers[ops.index("QuantizedConv")]
    assert pool.inputs[0] == conv1.outputs[0] and conv1.attrs["y_dtype"] == ("int8" if form == "q_after" else "uint8")
    off = steps_off(got[out], want[out], 0.04)
    assert off.max() <= 1 + 1e-5 and (off < 1e-5).mean() >= 0.98, (off.max(), (off < 1e-5).mean())


def test_a_float_reader_of_the_pool_keeps_it_float():
    model, out = _graph("q_after", extra_reader=True)
    engine, log, got, want = _run(model)
    _, ops = _layers(engine)
    assert ops.count("QuantizeLinear") == 2, ops          # the pool's Q runs as written, on a float pool
    assert "has readers besides the Q" in log
    assert steps_off(got[out], want[out], 0.04).max() <= 1 + 1e-5


def test_a_rescaling_q_after_the_pool_is_not_moved():
    model, out = _graph("dq_before", pool_scale=0.07)
    engine, log, got, want = _run(model)
    _, ops = _layers(engine)
    assert "QuantizeLinear" in ops[ops.index("MaxPool") + 1:], ops
    assert "do not use the same scale" in log
    assert steps_off(got[out], want[out], 0.04).max() <= 1 + 1e-5


def test_a_broken_rewrite_fails_the_check(monkeypatch):
    real = qdq_pool.quantize_before_maxpool

    def broken(net, **kw):
        n = real(net, **kw)
        for la in net.layers:
            if la.op == "QuantizedConv" and la.outputs[0].endswith("/quantized"):
                la.attrs["y_zero_point"] += 3
        return n
    monkeypatch.setattr("tensorforge.passes.rules.qdq_epilogue.quantize_before_maxpool", broken)
    model, out = _graph("q_after")
    _, _, got, want = _run(model)
    assert steps_off(got[out], want[out], 0.04).max() > 1 + 1e-5
