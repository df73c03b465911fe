"""RNN/GRU/LSTM through torch's fused kernels (kernels/torch_rnn.py) against onnxruntime: directions, layouts,
initial states, biases present or not, optional outputs; the fused tactic must be the one chosen, and the cases
torch cannot express (clip, peepholes, sequence_lens, linear_before_reset=0, reverse) keep the reference with the
reason recorded."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from tensorforge.kernels.registry import candidates
from tensorforge.kernels.torch_rnn import _unsupported
from tensorforge.parser import parse_model

from oracle import assert_close, ort_run

F = TensorProto.FLOAT
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def rnn_model(op, S=5, B=3, I=4, H=6, direction="forward", layout=0, bias=True, init=True, outputs=("Y", "Y_h"),
              seed=0, **attrs):
    rng = np.random.default_rng(seed)
    D = 2 if direction == "bidirectional" else 1
    G = GATES[op]
    inits = [numpy_helper.from_array(rng.normal(0, 0.5, (D, G * H, I)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.normal(0, 0.5, (D, G * H, H)).astype(np.float32), "R")]
    ins = ["x", "W", "R", "B" if bias else "", "", "h0" if init else ""]
    if bias:
        inits.append(numpy_helper.from_array(rng.normal(0, 0.5, (D, 2 * G * H)).astype(np.float32), "B"))
    xs = (B, S, I) if layout else (S, B, I)
    st = (B, D, H) if layout else (D, B, H)
    graph_in = [helper.make_tensor_value_info("x", F, xs)]
    if init:
        graph_in.append(helper.make_tensor_value_info("h0", F, st))
    if op == "LSTM" and init:
        ins.append("c0")
        graph_in.append(helper.make_tensor_value_info("c0", F, st))
    while ins and ins[-1] == "":
        ins.pop()
    outs = [o if o in outputs else "" for o in (["Y", "Y_h", "Y_c"] if op == "LSTM" else ["Y", "Y_h"])]
    while outs and outs[-1] == "":
        outs.pop()
    node = helper.make_node(op, ins, outs, hidden_size=H, direction=direction, layout=layout, **attrs)
    g = helper.make_graph([node], "rnn", graph_in, [helper.make_tensor_value_info(o, F, None) for o in outs if o],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    feeds = {"x": rng.normal(0, 1, xs).astype(np.float32)}
    if init:
        feeds["h0"] = rng.normal(0, 0.5, st).astype(np.float32)
        if op == "LSTM":
            feeds["c0"] = rng.normal(0, 0.5, st).astype(np.float32)
    return m.SerializeToString(), feeds


CASES = [
    ("LSTM", {}), ("LSTM", {"direction": "bidirectional"}), ("LSTM", {"layout": 1, "direction": "bidirectional"}),
    ("LSTM", {"bias": False, "init": False}), ("LSTM", {"outputs": ("Y_h", "Y_c")}),
    ("GRU", {"linear_before_reset": 1}), ("GRU", {"linear_before_reset": 1, "direction": "bidirectional"}),
    ("GRU", {"linear_before_reset": 1, "layout": 1, "init": False}),
    ("RNN", {}), ("RNN", {"direction": "bidirectional", "activations": ["Relu", "Relu"]}),
]


@pytest.fixture
def torch_fused_only(monkeypatch):
    """Hide the oneDNN RNN-primitive tactic (kernels/cpu_dnnl_rnn.py, preferred when its library is installed) so
    that builds choose torch_fused, the tactic these tests are about."""
    from tensorforge.kernels import registry
    for op in ("GRU", "LSTM", "RNN"):
        for t in registry._TACTICS.get(op, []):
            if t.name == "cpu_dnnl":
                monkeypatch.setattr(t, "supports", lambda layer, device: "hidden by the test (torch_fused only)")


@pytest.mark.parametrize("op,kw", CASES, ids=[f"{o}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for o, kw in CASES])
def test_fused_rnn_matches_onnxruntime(op, kw, torch_fused_only):
    model, feeds = rnn_model(op, **kw)
    engine = tfg.build(model, device="cpu")
    tactic_ids = [la.tactic for la in engine.data.layers if la.op == op]
    assert tactic_ids and all(t.startswith(f"{op.lower()}.torch_fused") for t in tactic_ids), tactic_ids
    assert_close(engine.run(dict(feeds)), oracle(model, feeds, kw.get("layout", 0)), rtol=1e-4, atol=1e-5)


def oracle(model, feeds, layout):
    """onnxruntime; for layout = 1 (batch-major), which onnxruntime's CPU RNNs refuse, onnx.reference."""
    if not layout:
        return ort_run(model, feeds)
    from onnx.reference import ReferenceEvaluator
    ref = ReferenceEvaluator(model)
    return dict(zip(ref.output_names, ref.run(None, feeds)))


@pytest.mark.parametrize("op,kw,reason", [
    ("LSTM", {"clip": 0.5}, "clip"),
    ("GRU", {"linear_before_reset": 0}, "linear_before_reset"),
    ("GRU", {"linear_before_reset": 1, "direction": "reverse"}, "reverse"),
    ("LSTM", {"input_forget": 1}, "input_forget"),
    ("RNN", {"activations": ["Sigmoid"]}, "tanh/relu"),
])
def test_semantics_torch_lacks_keep_the_reference(op, kw, reason):
    model, feeds = rnn_model(op, **kw)
    layer = next(la for la in parse_model(model).layers if la.op == op)
    why = _unsupported(layer, None)
    assert why is not None and reason in why
    found, reasons = candidates(layer, __import__("torch").device("cpu"))
    assert "torch_fused" in reasons and all(t.name != "torch_fused" for t, _ in found)
    assert_close(tfg.build(model, device="cpu").run(dict(feeds)), ort_run(model, feeds), rtol=1e-4, atol=1e-5)


def test_breaking_the_gate_order_is_caught(torch_fused_only):
    """The check can fail: with LSTM's gate reorder swapped (f and o exchanged) the outputs leave the tolerance."""
    from tensorforge.kernels import torch_rnn
    model, feeds = rnn_model("LSTM")
    want = ort_run(model, feeds)
    saved = torch_rnn._GATE_ORDER["LSTM"]
    torch_rnn._GATE_ORDER["LSTM"] = (0, 1, 3, 2)
    try:
        got = tfg.build(model, device="cpu").run(dict(feeds))
    finally:
        torch_rnn._GATE_ORDER["LSTM"] = saved
    with pytest.raises(AssertionError):
        assert_close(got, want, rtol=1e-4, atol=1e-5)
