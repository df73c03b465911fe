"""cpu_dnnl: ONNX GRU/LSTM as one oneDNN RNN primitive call (kernels/cpu_dnnl_rnn.py) against onnxruntime on
one-node models: directions, initial states and biases present or not, batch 1 and 3, linear_before_reset 0 and 1,
LSTM peepholes, layout 1 (against onnx.reference); checks that fail on a swapped gate and on a dropped recurrent
bias; the refusals and their reasons; one primitive per shape and weights packed once per engine."""

import numpy as np
import onnx
import pytest
import torch
from onnx import numpy_helper

import tensorforge as tfg
from oracle import assert_close, ort_run
from tensorforge.kernels import cpu_dnnl_rnn as dr
from tensorforge.kernels import onednn_capi, torch_rnn
from tensorforge.kernels.registry import candidates
from tensorforge.engine import from_bytes
from tensorforge.parser import parse_model
from tensorforge.runtime import ExecutionContext

from kernels.test_torch_rnn import oracle, rnn_model

CPU = torch.device("cpu")
pytestmark = pytest.mark.skipif(onednn_capi.library() is None, reason=str(onednn_capi.unavailable_reason()))
TOL = dict(rtol=1e-4, atol=1e-5)


def _with_peepholes(model: bytes, seed=1) -> bytes:
    """The LSTM model with a P input (D, 3·Hd) as an initializer."""
    m = onnx.load_from_string(model)
    node = m.graph.node[0]
    d = 2 if any(a.name == "direction" and a.s == b"bidirectional" for a in node.attribute) else 1
    hd = next(a.i for a in node.attribute if a.name == "hidden_size")
    p = np.random.default_rng(seed).normal(0, 0.5, (d, 3 * hd)).astype(np.float32)
    m.graph.initializer.append(numpy_helper.from_array(p, "P"))
    ins = list(node.input) + [""] * (7 - len(node.input)) + ["P"]
    del node.input[:]
    node.input.extend(ins)
    return m.SerializeToString()


def _build(model: bytes, op: str):
    engine = tfg.build(model, device="cpu")
    tactics = [la.tactic for la in engine.data.layers if la.op == op]
    assert tactics == [f"{op.lower()}.cpu_dnnl"], tactics
    return engine


CASES = [(op, dict(direction=d, bias=bias, init=init, B=b, **extra))
         for op, extra in [("GRU", {"linear_before_reset": 1}), ("GRU", {"linear_before_reset": 0}), ("LSTM", {})]
         for d in ("forward", "reverse", "bidirectional") for bias, init in ((True, True), (False, False))
         for b in (1, 3)]


@pytest.mark.parametrize("op,kw", CASES, ids=[f"{o}-" + "-".join(f"{k}={v}" for k, v in kw.items()) for o, kw in CASES])
def test_matches_onnxruntime(op, kw):
    model, feeds = rnn_model(op, S=7, I=5, H=6, **kw)
    assert_close(_build(model, op).run(dict(feeds)), ort_run(model, feeds), **TOL)


@pytest.mark.parametrize("kw", [{"bias": True, "init": False}, {"bias": False, "init": True},
                                {"outputs": ("Y_h",)}, {"outputs": ("Y",)}])
def test_one_state_or_bias_and_optional_outputs(kw):
    for op, extra in (("GRU", {"linear_before_reset": 1}), ("LSTM", {"outputs": ("Y_h", "Y_c")})):
        model, feeds = rnn_model(op, direction="bidirectional", **{**extra, **kw})
        assert_close(_build(model, op).run(dict(feeds)), ort_run(model, feeds), **TOL)


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_lstm_peepholes(direction):
    model, feeds = rnn_model("LSTM", direction=direction)
    model = _with_peepholes(model)
    assert_close(_build(model, "LSTM").run(dict(feeds)), ort_run(model, feeds), **TOL)


@pytest.mark.parametrize("op,kw", [("GRU", {"linear_before_reset": 1, "direction": "bidirectional"}),
                                   ("GRU", {"linear_before_reset": 0, "init": False}),
                                   ("LSTM", {"direction": "bidirectional"})])
def test_batch_major_layout(op, kw):
    """layout = 1 (X (B, S, I), Y (B, S, D, Hd)): oneDNN's ntc through strides; onnxruntime's CPU RNNs refuse this
    layout, so the oracle is onnx.reference."""
    model, feeds = rnn_model(op, layout=1, **kw)
    assert_close(_build(model, op).run(dict(feeds)), oracle(model, feeds, 1), **TOL)


def test_long_sequence_at_the_benchmark_size():
    """200 steps, 256 → 256 at batch 1 (bench/cpu.py's GRU layers), against onnxruntime."""
    model, feeds = rnn_model("GRU", S=200, B=1, I=256, H=256, linear_before_reset=1, seed=3)
    m = onnx.load_from_string(model)
    for init in m.graph.initializer:                       # weights at nn.GRU's scale, so the state stays O(1)
        init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) / 16, init.name))
    model = m.SerializeToString()
    assert_close(_build(model, "GRU").run(dict(feeds)), ort_run(model, feeds), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("op,break_it", [
    ("GRU", lambda m: _swap_gates(m, "W", 0, 1)),          # z and r exchanged in W
    ("GRU", lambda m: _swap_gates(m, "R", 1, 2)),          # r and h exchanged in R
    ("LSTM", lambda m: _swap_gates(m, "W", 1, 2)),         # o and f exchanged in W
])
def test_a_broken_weight_layout_is_caught(op, break_it):
    """The comparison can fail: the kernel run on a copy of the weights with two gates swapped leaves the tolerance
    of onnxruntime's result on the original model (and matches onnxruntime on the swapped model)."""
    model, feeds = rnn_model(op, direction="bidirectional", **({"linear_before_reset": 1} if op == "GRU" else {}))
    broken = break_it(model)
    got = _build(broken, op).run(dict(feeds))
    assert_close(got, ort_run(broken, feeds), **TOL)
    with pytest.raises(AssertionError):
        assert_close(got, ort_run(model, feeds), **TOL)


def test_the_lbr_bias_split_is_checked(monkeypatch):
    """linear_before_reset's Rbh sits inside r ⊙ (·): a kernel that folds it into Wbh, as the plain GRU does, is
    caught."""
    model, feeds = rnn_model("GRU", linear_before_reset=1)
    want = ort_run(model, feeds)
    real = dr.RnnRunner._bias

    def folded(self, b, hd):
        out = real(self, b, hd).clone()
        out[:, :, 2] += out[:, :, 3]
        out[:, :, 3] = 0
        return out
    monkeypatch.setattr(dr.RnnRunner, "_bias", folded)
    with pytest.raises(AssertionError):
        assert_close(_build(model, "GRU").run(dict(feeds)), want, **TOL)


def test_a_wrong_lstm_gate_order_is_caught(monkeypatch):
    """The kernel's own gate map broken (oneDNN's f and o taken from the wrong ONNX gates) leaves the tolerance."""
    model, feeds = rnn_model("LSTM", direction="bidirectional")
    want = ort_run(model, feeds)
    monkeypatch.setattr(dr, "LSTM_GATES", (0, 1, 3, 2))
    with pytest.raises(AssertionError):
        assert_close(_build(model, "LSTM").run(dict(feeds)), want, **TOL)


def _swap_gates(model: bytes, name: str, a: int, b: int) -> bytes:
    m = onnx.load_from_string(model)
    init = next(i for i in m.graph.initializer if i.name == name)
    arr = numpy_helper.to_array(init).copy()
    g = {"GRU": 3, "LSTM": 4}[m.graph.node[0].op_type]
    hd = arr.shape[1] // g
    sa, sb = slice(a * hd, (a + 1) * hd), slice(b * hd, (b + 1) * hd)
    arr[:, sa], arr[:, sb] = arr[:, sb].copy(), arr[:, sa].copy()
    init.CopyFrom(numpy_helper.from_array(arr, name))
    return m.SerializeToString()


@pytest.mark.parametrize("op,kw,reason", [
    ("GRU", {"linear_before_reset": 1, "clip": 0.5}, "clip"),
    ("LSTM", {"input_forget": 1}, "input_forget"),
    ("GRU", {"linear_before_reset": 1, "activations": ["Sigmoid", "Relu"]}, "activations"),
    ("LSTM", {"activation_alpha": [0.5]}, "alpha"),
])
def test_refusals_say_why_and_another_tactic_runs(op, kw, reason):
    model, feeds = rnn_model(op, **kw)
    layer = next(la for la in parse_model(model).layers if la.op == op)
    why = dr._reason(layer, CPU)
    assert why is not None and reason in why
    found, reasons = candidates(layer, CPU)
    assert reason in reasons["cpu_dnnl"] and all(t.name != "cpu_dnnl" for t, _ in found)
    engine = tfg.build(model, device="cpu")
    assert all(not la.tactic.endswith("cpu_dnnl") for la in engine.data.layers)
    assert_close(engine.run(dict(feeds)), ort_run(model, feeds), **TOL)


def test_other_refusals(monkeypatch):
    model, _ = rnn_model("GRU", linear_before_reset=1)
    layer = next(la for la in parse_model(model).layers if la.op == "GRU")
    assert "CPU tactic" in dr._reason(layer, torch.device("cuda"))
    lens = parse_model(model).layers[0]
    lens.inputs = lens.inputs[:4] + ["seq_lens"] + lens.inputs[5:]
    assert "sequence_lens" in dr._reason(lens, CPU)
    half = parse_model(model).layers[0]
    half.precision = "float16"
    assert "float16" in dr._reason(half, CPU)
    x, w, r = torch.randn(5, 3, 4), torch.randn(1, 18, 4), torch.randn(1, 18, 6)
    assert "float32" in dr._fits(layer, {}, [x.double(), w, r])
    assert "shape" in dr._fits(layer, {}, [x, w, r, torch.randn(1, 18)])
    with pytest.raises(ValueError, match="does not take"):
        dr._build(layer, {}, CPU)([x, w[:, :12], r])
    monkeypatch.setattr(onednn_capi, "_LIB", ["oneDNN's C library is not installed (pip install x)"])
    assert "pip install" in dr._reason(layer, CPU)


def test_weights_packed_once_per_engine():
    """Two contexts of one engine share the packed W and R; the same file loaded again is another engine and packs
    its own; further calls pack nothing."""
    model, feeds = rnn_model("GRU", linear_before_reset=1, direction="bidirectional")
    data = _build(model, "GRU").serialize()
    want = ort_run(model, feeds)
    feed = {k: torch.from_numpy(v) for k, v in feeds.items()}
    engine = from_bytes(data)
    start = onednn_capi.PACK_COUNT[0]
    a, b = ExecutionContext(engine, "cpu"), ExecutionContext(engine, "cpu")
    assert_close(a.run(feed), want, **TOL)
    assert onednn_capi.PACK_COUNT[0] - start == 2                     # W and R
    assert_close(b.run(feed), want, **TOL)
    a.run(feed)
    assert onednn_capi.PACK_COUNT[0] - start == 2
    ExecutionContext(from_bytes(data), "cpu").run(feed)
    assert onednn_capi.PACK_COUNT[0] - start == 4


def test_one_primitive_per_shape():
    model, _ = rnn_model("GRU", linear_before_reset=1, direction="bidirectional")
    layer = next(la for la in parse_model(model).layers if la.op == "GRU")
    run = dr.RnnRunner(layer)
    w, r, b = torch.randn(2, 18, 4), torch.randn(2, 18, 6), torch.randn(2, 36)
    for _ in range(2):
        run(torch.randn(5, 3, 4), w, r, b)
    assert len(run.prims) == 1
    run(torch.randn(7, 3, 4), w, r, b)                                 # another shape: another primitive
    run(torch.randn(7, 3, 4), w, r, b, torch.randn(2, 3, 6))           # an initial state: another primitive
    assert len(run.prims) == 3


@pytest.mark.parametrize("hidden,batch,want_threads", [(6, 3, 1), (256, 1, 1), (600, 1, 2)])
def test_small_steps_run_on_one_thread(hidden, batch, want_threads, monkeypatch):
    """torch_rnn's rule: one intra-op thread when a step's hidden GEMM is small (GRU 256 at batch 1: 196 608
    multiply-adds), the caller's count otherwise (GRU 600: 1 080 000); the primitive is made under the count it runs
    at (oneDNN sizes its thread team at creation) and the caller's count is back afterwards."""
    assert (batch * 3 * hidden * hidden <= torch_rnn.SMALL_STEP) == (want_threads == 1)
    model, _ = rnn_model("GRU", linear_before_reset=1, S=3, B=batch, I=4, H=hidden)
    layer = next(la for la in parse_model(model).layers if la.op == "GRU")
    run = dr.RnnRunner(layer)
    seen, real = [], onednn_capi.Primitive.execute

    def spy(self, pointers):
        seen.append(torch.get_num_threads())
        return real(self, pointers)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        monkeypatch.setattr(onednn_capi.Primitive, "execute", spy)
        run(torch.randn(3, batch, 4), torch.randn(1, 3 * hidden, 4), torch.randn(1, 3 * hidden, hidden))
        assert seen[-1] == want_threads and torch.get_num_threads() == 2
        assert [key[-1] for key in run.prims] == [want_threads]
    finally:
        torch.set_num_threads(before)
