"""TF32 where a user looks (issue 17.4): `inspect` says whether an engine's fp32 matmul/conv layers run in TF32,
and `compare` says it for its fp32 runner and, beside a `tensorforge-notf32` runner, shows the difference.
TF32 only exists on CUDA: a CPU-built engine is re-labelled as CUDA-built in its manifest to drive that branch
(the data inspect reads), and compare's note arithmetic is checked against a difference computed here."""

import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from tensorforge.builder.tf32_report import tf32_state
from tensorforge.cli.main import main
from tensorforge.compare.session import _tf32_notes
from tensorforge.compare.runners import make_runner


def _model(tmp_path):
    w = numpy_helper.from_array(np.random.RandomState(0).randn(8, 4).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
                          "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    return path


def _engine(tmp_path, device_label=None, tf32=True):
    e = tfg.build(str(_model(tmp_path)), device="cpu", tf32=tf32)
    if device_label:
        e.data.build_info["device"] = device_label
    path = tmp_path / f"m-{bool(device_label)}-{tf32}.engine"
    e.save(str(path))
    return path


def test_inspect_says_when_tf32_applies(tmp_path, capsys):
    cases = [(None, True, "TF32 does not apply: built for the CPU"),
             ("cuda:NVIDIA H200:sm_90", True, "TF32 on for 1 fp32 matmul/conv layer(s)"),
             ("cuda:NVIDIA H200:sm_90", False, "TF32 off (--noTF32)")]
    for label, tf32, want in cases:
        path = _engine(tmp_path, label, tf32)
        assert main(["inspect", str(path)]) == 0
        assert want in capsys.readouterr().out
        assert main(["inspect", str(path), "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["tf32"]["applies"] == (label is not None and tf32)


def test_an_fp16_engine_has_no_tf32_layers(tmp_path):
    e = tfg.build(str(_model(tmp_path)), device="cpu", fp16=True)
    e.data.build_info["device"] = "cuda:NVIDIA H200:sm_90"
    assert tf32_state(e.data)["layers"] == 0 and not tf32_state(e.data)["applies"]


def test_compare_notes_tf32_and_the_difference_to_the_notf32_runner(tmp_path):
    proto = onnx.load(str(_model(tmp_path)))
    feeds = {"x": np.random.RandomState(1).randn(2, 8).astype(np.float32)}
    on, off = make_runner("tensorforge", proto, device="cpu"), make_runner("tensorforge-notf32", proto, device="cpu")
    results = {r.name: r.run(feeds) for r in (on, off)}
    assert "noTF32" in off.engine.data.build_info["flags"] and "noTF32" not in on.engine.data.build_info["flags"]
    assert _tf32_notes([on, off], results, ["y"]) == []               # CPU engines: TF32 does not apply
    on.engine.data.build_info["device"] = "cuda:NVIDIA H200:sm_90"
    results[on.name] = {"y": results[off.name]["y"] + np.float32(0.01) * (np.arange(8).reshape(2, 4) == 5)}
    notes = _tf32_notes([on, off], results, ["y"])
    assert len(notes) == 2 and "TF32 on for 1 fp32 matmul/conv layer(s)" in notes[0]
    a, b = results[on.name]["y"].astype(np.float64), results[off.name]["y"].astype(np.float64)
    d, peak = np.abs(a - b).max(), np.abs(b).max()
    assert 0.009 < d < 0.011
    assert f"TF32 on (tensorforge) vs off (tensorforge-notf32): y max |Δ| {d:.3g} ({d / peak:.2g} of its max)" == notes[1]
