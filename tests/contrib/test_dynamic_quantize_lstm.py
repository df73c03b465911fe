"""com.microsoft DynamicQuantizeLSTM against onnxruntime (rtol 1e-3, atol 1e-4): LSTM models quantized by
onnxruntime's own quantize_dynamic (per tensor and per channel; forward, reverse, bidirectional; initial states),
hand-built nodes for uint8 weights, peepholes, clip and input_forget, sequence_lens (with and without Y), the
int_mm and float_exact tactics against the float64 reference, and refusals with a reason.

onnxruntime splits a batch of B ≥ 2 across its intra-op threads and quantizes H per chunk; the op quantizes the
whole batch (= onnxruntime with one thread), so batched cases compare with a one-thread session."""

import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from oracle import assert_close
from tensorforge.api.high_level import Engine
from tensorforge.engine import from_bytes
from tensorforge.ir import get_spec
from tensorforge.util.errors import UnsupportedOpError

quantization = pytest.importorskip("onnxruntime.quantization")
RNG = np.random.default_rng(11)
F = TensorProto.FLOAT


def _ort(model: bytes, feeds: dict) -> dict:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def _check(model, feeds):
    data = model if isinstance(model, bytes) else model.SerializeToString()
    want = _ort(data, feeds)
    engine = tfg.build(data, device="cpu")
    assert_close(engine.run(dict(feeds)), want, 1e-3, 1e-4, "built: ")
    assert_close(Engine(from_bytes(engine.serialize()), "cpu").run(dict(feeds)), want, 1e-3, 1e-4, "reloaded: ")
    return engine


def _lstm_model(seq, batch, inp, hid, direction="forward", with_states=False, with_bias=True):
    d = 2 if direction == "bidirectional" else 1
    inits = {"W": (RNG.normal(size=(d, 4 * hid, inp)) * 0.4).astype(np.float32),
             "R": (RNG.normal(size=(d, 4 * hid, hid)) * 0.4).astype(np.float32),
             "B": (RNG.normal(size=(d, 8 * hid)) * 0.2).astype(np.float32)}
    ins = ["x", "W", "R", "B" if with_bias else ""]
    graph_inputs = [helper.make_tensor_value_info("x", F, [seq, batch, inp])]
    if with_states:
        ins += ["", "h0", "c0"]
        graph_inputs += [helper.make_tensor_value_info(n, F, [d, batch, hid]) for n in ("h0", "c0")]
    node = helper.make_node("LSTM", ins, ["y", "y_h", "y_c"], hidden_size=hid, direction=direction)
    g = helper.make_graph([node], "lstm", graph_inputs,
                          [helper.make_tensor_value_info(n, F, None) for n in ("y", "y_h", "y_c")],
                          [numpy_helper.from_array(v, k) for k, v in inits.items() if k in ins])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 9
    return m


def _feeds(seq, batch, inp, hid, d, with_states):
    feeds = {"x": RNG.normal(size=(seq, batch, inp)).astype(np.float32)}
    if with_states:
        feeds["h0"] = (RNG.normal(size=(d, batch, hid)) * 0.5).astype(np.float32)
        feeds["c0"] = (RNG.normal(size=(d, batch, hid)) * 0.5).astype(np.float32)
    return feeds


@pytest.mark.parametrize("per_channel,direction,batch,with_states", [
    (False, "forward", 1, False), (True, "forward", 3, False), (True, "reverse", 2, True),
    (False, "bidirectional", 2, True), (True, "bidirectional", 1, False)])
def test_dynamic_quantize_lstm_from_quantize_dynamic(tmp_path, per_channel, direction, batch, with_states):
    seq, inp, hid = 6, 10, 8
    src, dst = tmp_path / "lstm.onnx", tmp_path / "lstm_q.onnx"
    onnx.save(_lstm_model(seq, batch, inp, hid, direction, with_states), src)
    quantization.quantize_dynamic(str(src), str(dst), per_channel=per_channel,
                                  weight_type=quantization.QuantType.QInt8, op_types_to_quantize=["LSTM"])
    q = onnx.load(dst)
    assert [n.op_type for n in q.graph.node] == ["DynamicQuantizeLSTM"], [n.op_type for n in q.graph.node]
    _check(q, _feeds(seq, batch, inp, hid, 2 if direction == "bidirectional" else 1, with_states))


def _dq_node_model(seq, batch, inp, hid, *, uint8=False, peephole=False, attrs=None, per_channel=True):
    """A hand-built DynamicQuantizeLSTM: weights (D, I, 4H) / (D, H, 4H) as onnxruntime's quantizer lays them out."""
    np_t = np.uint8 if uint8 else np.int8
    lo, hi = (0, 256) if uint8 else (-127, 128)
    cols = (1, 4 * hid) if per_channel else (1,)
    zp = np.full(cols, 128 if uint8 else 0, np_t)
    inits = {"W": RNG.integers(lo, hi, (1, inp, 4 * hid)).astype(np_t),
             "R": RNG.integers(lo, hi, (1, hid, 4 * hid)).astype(np_t),
             "B": (RNG.normal(size=(1, 8 * hid)) * 0.2).astype(np.float32),
             "P": (RNG.normal(size=(1, 3 * hid)) * 0.3).astype(np.float32),
             "ws": (RNG.random(cols) * 0.004 + 0.002).astype(np.float32), "wz": zp,
             "rs": (RNG.random(cols) * 0.004 + 0.002).astype(np.float32), "rz": zp.copy()}
    ins = ["x", "W", "R", "B", "", "", "", "P" if peephole else "", "ws", "wz", "rs", "rz"]
    node = helper.make_node("DynamicQuantizeLSTM", ins, ["y", "y_h", "y_c"], domain="com.microsoft",
                            hidden_size=hid, **(attrs or {}))
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, [seq, batch, inp])],
                          [helper.make_tensor_value_info(n, F, None) for n in ("y", "y_h", "y_c")],
                          [numpy_helper.from_array(v, k) for k, v in inits.items() if k in ins])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 9
    return m, {"x": RNG.normal(size=(seq, batch, inp)).astype(np.float32)}


@pytest.mark.parametrize("kw", [dict(uint8=True), dict(peephole=True), dict(attrs={"clip": 0.5}),
                                dict(attrs={"input_forget": 1}, per_channel=False), dict(uint8=True, peephole=True)])
def test_dynamic_quantize_lstm_nodes(kw):
    model, feeds = _dq_node_model(5, 2, 12, 6, **kw)
    _check(model, feeds)


@pytest.mark.parametrize("tactic_name", ["DynamicQuantizeLSTMIntMM", "DynamicQuantizeLSTMFloatExact"])
def test_tactics_match_reference(tactic_name):
    """Both integer-GEMM tactics equal the float64 reference bit for bit; input size 600 makes float_exact cut the
    X GEMM into chunks."""
    from tensorforge.kernels import contrib_quant
    for uint8, inp in ((False, 9), (True, 9), (False, 600), (True, 600)):
        model, feeds = _dq_node_model(4, 3, inp, 5, uint8=uint8, peephole=True)
        inits = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in model.graph.initializer}
        node = model.graph.node[0]
        args = [torch.from_numpy(feeds["x"]) if n == "x" else (inits[n] if n else None) for n in node.input]
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        want = get_spec("DynamicQuantizeLSTM").reference(*args, **attrs)
        layer = type("L", (), {"attrs": attrs, "outputs": ["y", "y_h", "y_c"], "op": "DynamicQuantizeLSTM"})()
        got = getattr(contrib_quant, tactic_name).build(layer, {}, torch.device("cpu"))(args)
        for g, w in zip(got, want):
            assert torch.equal(g, w)


@pytest.mark.parametrize("direction,lens,outputs", [
    ("forward", [6, 3, 5], ("y", "y_h", "y_c")), ("forward", [4, 2, 3], ("", "y_h", "y_c")),
    ("reverse", [6, 3, 5], ("y", "y_h", "")), ("bidirectional", [5, 2, 4], ("y", "y_h", "y_c")),
    ("bidirectional", [6, 1, 3], ("", "y_h", "y_c"))])
def test_dynamic_quantize_lstm_sequence_lens(tmp_path, direction, lens, outputs):
    """quantize_dynamic on an LSTM with sequence_lens: padded steps, finished rows in the per-step H scale (0 when
    Y is an output, the last state when only Y_h / Y_c are), per-entry reversal in the reverse direction."""
    seq, batch, inp, hid = 6, 3, 7, 8
    src, dst = tmp_path / "lstm.onnx", tmp_path / "lstm_q.onnx"
    m = _lstm_model(seq, batch, inp, hid, direction)
    node = m.graph.node[0]
    node.input[4:] = ["lens"]
    m.graph.input.append(helper.make_tensor_value_info("lens", TensorProto.INT32, [batch]))
    del node.output[:]
    node.output.extend(outputs)
    del m.graph.output[:]
    m.graph.output.extend([helper.make_tensor_value_info(o, F, None) for o in outputs if o])
    onnx.save(m, src)
    quantization.quantize_dynamic(str(src), str(dst), weight_type=quantization.QuantType.QInt8,
                                  op_types_to_quantize=["LSTM"])
    q = onnx.load(dst)
    assert [n.op_type for n in q.graph.node] == ["DynamicQuantizeLSTM"]
    feeds = _feeds(seq, batch, inp, hid, 2 if direction == "bidirectional" else 1, False)
    feeds["lens"] = np.array(lens, np.int32)
    _check(q, feeds)


def test_refusals_say_why():
    model, _ = _dq_node_model(3, 1, 4, 2)
    zp = next(t for t in model.graph.initializer if t.name == "wz")
    zp.CopyFrom(numpy_helper.from_array(np.full((1, 8), 3, np.int8), "wz"))
    with pytest.raises(UnsupportedOpError, match="zero point"):
        tfg.build(model.SerializeToString(), device="cpu")


def test_crnn_quantized_by_quantize_dynamic(tmp_path):
    """An OCR-style recogniser (conv → columns → bidirectional LSTM → classifier) exported by torch from random
    weights and quantized by quantize_dynamic: DynamicQuantizeLSTM beside ConvInteger and MatMulInteger."""
    import warnings

    class Crnn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 8, 3, padding=1)
            self.lstm = torch.nn.LSTM(32, 16, bidirectional=True)
            self.fc = torch.nn.Linear(32, 10)

        def forward(self, x):
            f = torch.relu(self.conv(x))                          # (B, 8, 4, W)
            b, c, h, w = f.shape
            y, _ = self.lstm(f.permute(3, 0, 1, 2).reshape(w, b, c * h))
            return self.fc(y).log_softmax(-1)

    torch.manual_seed(0)
    x = torch.randn(1, 1, 4, 12)
    src, dst = tmp_path / "crnn.onnx", tmp_path / "crnn_q.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Crnn().eval(), (x,), str(src), input_names=["x"], output_names=["y"], opset_version=14,
                          dynamo=False)
    quantization.quantize_dynamic(str(src), str(dst), weight_type=quantization.QuantType.QInt8)
    q = onnx.load(dst)
    assert "DynamicQuantizeLSTM" in {n.op_type for n in q.graph.node}
    _check(q, {"x": np.random.default_rng(1).normal(size=(1, 1, 4, 12)).astype(np.float32)})


def test_long_sequence_stays_on_onnxruntimes_codes(tmp_path, monkeypatch):
    """A 20-step, batch-8, hidden-64 bidirectional LSTM whose H lands near a rounding boundary at step 6: with
    torch's sigmoid/tanh (an ulp off MLAS's) one 8-bit code flips and later steps move by ~8e-3; with MLAS's
    rational approximations the result stays within float32 rounding of onnxruntime's."""
    monkeypatch.setattr(sys.modules[__name__], "RNG", np.random.default_rng(106))
    src, dst = tmp_path / "lstm.onnx", tmp_path / "lstm_q.onnx"
    onnx.save(_lstm_model(20, 8, 32, 64, "bidirectional"), src)
    quantization.quantize_dynamic(str(src), str(dst), weight_type=quantization.QuantType.QInt8)
    model = dst.read_bytes()
    feeds = _feeds(20, 8, 32, 64, 2, False)
    want = _ort(model, feeds)
    got = tfg.build(model, device="cpu").run(dict(feeds))
    for name, w in want.items():
        assert float(np.abs(np.asarray(got[name]) - w).max()) <= 1e-6, name
