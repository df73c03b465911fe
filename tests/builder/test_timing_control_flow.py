"""Control-flow layers (If/Loop/Scan) on the timed build path — the path CUDA builds take — driven on the CPU with a
fake timer: a body is a Network attribute, and the timing-cache signature must encode it as JSON (issue 17.3:
"Object of type Network is not JSON serializable" on every CUDA build of such a model). Each model is compared with
onnxruntime, the timing cache is written and reloaded, and two bodies that differ get different signatures."""

import functools
import json

import numpy as np
import pytest
from onnx import TensorProto, helper

import tensorforge as tfg
from tensorforge.builder import BuilderConfig, builder as builder_module, tactics
from tensorforge.builder.timing_cache import TimingCache, layer_signature

from oracle import assert_close, ort_run

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


class EveryTacticTimer:
    """Times every candidate (the CUDA build's behaviour) and runs it once, as the real timer does."""

    def __init__(self):
        self.calls = []

    def measure(self, tactic_id, run):
        run()
        self.calls.append(tactic_id)
        return tactics.Measurement([0.1] * 3, 0)


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, opset, inits=()):
    m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits)),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m.SerializeToString()


def if_model(then_op="Mul"):
    then_g = helper.make_graph([helper.make_node(then_op, ["x", "w"], ["t"])], "then", [], [_vi("t", F, [3])])
    else_g = helper.make_graph([helper.make_node("Sub", ["x", "w"], ["e"])], "else", [], [_vi("e", F, [3])])
    return _model([helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0), helper.make_node("Greater", ["s", "zero"], ["c"]),
                   helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
                   helper.make_node("Relu", ["y"], ["z"])],
                  [_vi("x", F, [3])], [_vi("z", F, [3])], 11,
                  [helper.make_tensor("w", F, [3], [2, 3, 4]), helper.make_tensor("zero", F, [], [0])])


def loop_model():
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "step"], ["acc_out"]), helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Mul", ["acc_out", "acc_out"], ["sq"])],
        "body", [_vi("i", I64, []), _vi("cond_in", B, []), _vi("acc_in", F, [2])],
        [_vi("cond_out", B, []), _vi("acc_out", F, [2]), _vi("sq", F, [2])])
    return _model([helper.make_node("Loop", ["n", "c", "a0"], ["a", "sqs"], body=body)],
                  [_vi("n", I64, []), _vi("c", B, []), _vi("a0", F, [2])], [_vi("a", F, [2]), _vi("sqs", F, None)], 13,
                  [helper.make_tensor("step", F, [2], [0.5, -1.0])])


def scan_model():
    body = helper.make_graph([helper.make_node("Add", ["s", "x"], ["s2"]), helper.make_node("Identity", ["s2"], ["y"])],
                             "body", [_vi("s", F, [2]), _vi("x", F, [2])], [_vi("s2", F, [2]), _vi("y", F, [2])])
    return _model([helper.make_node("Scan", ["s0", "xs"], ["s", "ys"], body=body, num_scan_inputs=1)],
                  [_vi("s0", F, [2]), _vi("xs", F, [4, 2])], [_vi("s", F, [2]), _vi("ys", F, [4, 2])], 16)


CASES = {
    "if_true": (if_model, {"x": np.array([1, 2, 3], np.float32)}),
    "if_false": (if_model, {"x": np.array([-5, 1, 1], np.float32)}),
    "loop": (loop_model, {"n": np.array(4, np.int64), "c": np.array(True), "a0": np.array([1, 2], np.float32)}),
    "scan": (scan_model, {"s0": np.ones(2, np.float32), "xs": np.arange(8, dtype=np.float32).reshape(4, 2)}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_control_flow_builds_on_the_timed_path(monkeypatch, tmp_path, case):
    make, feeds = CASES[case]
    timer = EveryTacticTimer()
    monkeypatch.setattr(builder_module, "choose_tactics", functools.partial(tactics.choose_tactics, timer=timer))
    cache_file = tmp_path / "cache.json"
    config = BuilderConfig(device="cpu", timing_cache_path=str(cache_file))
    engine = tfg.build(make(), config=config, device="cpu")
    assert_close(engine.run(dict(feeds)), ort_run(make(), feeds), rtol=1e-6, atol=1e-6, what=f"{case}: ")
    assert cache_file.exists()
    json.loads(cache_file.read_text())                     # valid JSON, bodies included
    assert TimingCache.load(str(cache_file)).devices       # and readable back


def test_bodies_that_differ_have_different_signatures():
    from tensorforge.parser import parse_model
    sigs = []
    for op in ("Mul", "Add"):
        net = parse_model(if_model(op))
        layer = next(la for la in net.layers if la.op == "If")
        key, sig = layer_signature(layer, [None], ["if.subnetwork"])
        json.dumps(sig)
        sigs.append(key)
    assert sigs[0] != sigs[1]
