"""Network-context timing (builder/context_timing.py), on the CPU with test tactics and a fake pair timer.

Oracles: close calls against gaps computed by hand; the whole-network program against onnxruntime; the swap
decision against a closed-form cost model of the network (the fake timer), with a kernel broken by 1 % on purpose
(never swapped in, however fast); a warm timing cache reproducing the swaps without timing anything."""

import functools

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from tensorforge.builder import BuilderConfig, builder as builder_module, context_timing, tactics
from tensorforge.builder.context_timing import NetworkProgram, close_calls, refine_in_context
from tensorforge.builder.timing_cache import TimingCache
from tensorforge.kernels import registry
from tensorforge.kernels.registry import Tactic

from oracle import ort_run


def test_close_calls_by_hand():
    times = {   # layer → (signature key, tactic → isolated ms)
        "a1": ("k1", {"conv.cudnn[layout=nchw]": 0.010, "conv.cudnn[layout=nhwc]": 0.011}),        # gap 10 %
        "a2": ("k1", {"conv.cudnn[layout=nchw]": 0.010, "conv.cudnn[layout=nhwc]": 0.011}),        # same group
        "b": ("k2", {"gemm.triton[BM=64,TMA=1]": 0.0030, "gemm.triton[BM=16]": 0.0045,              # 0.0045 ≤ 0.003
                     "gemm.triton[BM=128,TMA=1]": 0.0031}),                        # ·1.25 + 0.002: 50 %; same family
        "c": ("k3", {"gemm.tma[B=64]": 0.100, "gemm.ptr[B=16]": 0.130}),      # 0.130 > 0.100·1.25 + 0.002: no
        "d": ("k4", {"relu.fast[B=1]": 0.01, "relu.fast[B=2]": 0.01}),         # one family: no alternative
        "e": ("k5", {"relu.fast": 0.01, "relu.slow": 0.011}),                  # chosen tactic not timed: left alone
    }
    chosen = {"a1": "conv.cudnn[layout=nchw]", "a2": "conv.cudnn[layout=nchw]", "b": "gemm.triton[BM=64,TMA=1]",
              "c": "gemm.tma[B=64]", "d": "relu.fast[B=1]", "e": "relu.other"}
    groups = close_calls(times, chosen)
    assert [g.to for g in groups] == [{"a1": "conv.cudnn[layout=nhwc]", "a2": "conv.cudnn[layout=nhwc]"},
                                      {"b": "gemm.triton[BM=16]"}]
    assert groups[0].gap == pytest.approx(0.1) and groups[1].gap == pytest.approx(0.5)
    assert context_timing.family("gemm.triton[BK=64,BM=128,TMA=1,stages=3]") == "gemm.triton[TMA=1]"


def test_layout_groups_by_hand():
    """Two NCHW winners and two NHWC winners: the NHWC group switches both NCHW layers (c2 just within 50 % + 5 µs:
    0.020 ≤ 0.010·1.5 + 0.005), the NCHW group switches c3; c4, 3× slower in NCHW, stays out."""
    times = {"c1": ("k1", {"conv.x[layout=nchw]": 0.010, "conv.x[layout=nhwc]": 0.011}),
             "c2": ("k2", {"conv.x[layout=nchw]": 0.010, "conv.x[layout=nhwc]": 0.020}),
             "c3": ("k3", {"conv.x[layout=nchw]": 0.012, "conv.x[layout=nhwc]": 0.010}),
             "c4": ("k4", {"conv.x[layout=nchw]": 0.030, "conv.x[layout=nhwc]": 0.010}),
             "g": ("k5", {"gemm.y[BM=16]": 0.01, "gemm.y[BM=64]": 0.011})}
    chosen = {"c1": "conv.x[layout=nchw]", "c2": "conv.x[layout=nchw]", "c3": "conv.x[layout=nhwc]",
              "c4": "conv.x[layout=nhwc]", "g": "gemm.y[BM=16]"}
    groups = context_timing.layout_groups(times, chosen)
    assert [g.to for g in groups] == [{"c3": "conv.x[layout=nchw]"},
                                      {"c1": "conv.x[layout=nhwc]", "c2": "conv.x[layout=nhwc]"}]
    assert groups[1].gap == pytest.approx((0.031 - 0.020) / 0.020)


# ---- a network of Relus with three test tactic families ----------------------------------------------------
def relu_model() -> bytes:
    """r1..r3: (n, 8), one timing question; r4 on the (n, 16) Concat; then a Reshape whose target shape is shape
    arithmetic (Shape → Gather → Concat: host layers, a value input of the Reshape)."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r1"), helper.make_node("Relu", ["a"], ["b"], name="r2"),
             helper.make_node("Relu", ["b"], ["c"], name="r3"),
             helper.make_node("Concat", ["c", "c"], ["d"], name="cat", axis=1),
             helper.make_node("Relu", ["d"], ["e"], name="r4"),
             helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "zero"], ["n"], name="gather", axis=0),
             helper.make_node("Concat", ["n", "tail"], ["target"], name="cat_shape", axis=0),
             helper.make_node("Reshape", ["e", "target"], ["y"], name="reshape")]
    inits = [numpy_helper.from_array(np.array([0], np.int64), "zero"),
             numpy_helper.from_array(np.array([4, 4], np.int64), "tail")]
    graph = helper.make_graph(nodes, "relus", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


SHAPES = {"x": ((4, 8), (4, 8), (4, 8))}


def _relu_tactic(name, scale=1.0):
    def build(layer, cfg, device):
        return lambda inputs: [torch.clamp(inputs[0], min=0) * scale]
    return Tactic("Relu", name, lambda layer, device: None, build, [{}], 0)


@pytest.fixture
def relu_tactics(monkeypatch):
    monkeypatch.setitem(registry._TACTICS, "Relu", [_relu_tactic("fast"), _relu_tactic("slow"), _relu_tactic("far")])


class IsolatedTimer:
    """Layer-by-layer times: fast wins alone, slow ties within 10 %, far is out of reach."""
    MS = {"fast": 0.010, "slow": 0.011, "far": 0.100, "torch_ref": 1.0}

    def measure(self, tactic_id, run):
        run()
        return tactics.Measurement([self.MS[tactic_id.split(".", 1)[1].split("[")[0]]] * 3)


class NetworkCostTimer:
    """The network's time by a closed form: Σ over Relus of the in-context cost of each one's tactic — `slow` is
    cheaper than `fast` in r1..r3's context (0.004 vs 0.010 ms), dearer in r4's (0.020)."""

    def __init__(self):
        self.calls = 0

    @staticmethod
    def cost(prog: NetworkProgram) -> float:
        total = 0.0
        for layer, tid in prog.choice.items():
            if tid.startswith("relu.slow"):
                total += 0.004 if layer in ("r1", "r2", "r3") else 0.020
            elif tid.startswith("relu.fast"):
                total += 0.010
        return total

    def compare(self, a, b):
        self.calls += 1
        a.run(), b.run()
        return self.cost(a), self.cost(b)


def build(monkeypatch, pair_timer, **kw):
    monkeypatch.setattr(builder_module, "choose_tactics", functools.partial(tactics.choose_tactics,
                                                                            timer=IsolatedTimer()))
    reports = []

    def context_step(config, device):
        def step(net, walk, cache, dev_key, report):
            rep = refine_in_context(net, walk, report.times, pair_timer, config.tf32, cache, dev_key)
            reports.append(rep)
            report.context = rep.as_dict()
        return step
    monkeypatch.setattr(builder_module, "_context_step", context_step)
    kw.setdefault("optimization_level", 1)
    kw.setdefault("point_tactics", False)
    config = BuilderConfig(device="cpu", profiles=tfg.api.high_level._as_profile(SHAPES), **kw)
    return tfg.build(relu_model(), config=config, device="cpu"), reports


def _tactics(engine):
    return {layer.name: layer.tactic for layer in engine.data.layers if layer.op == "Relu"}


def test_swaps_what_the_network_says_and_keeps_the_rest(monkeypatch, relu_tactics):
    timer = NetworkCostTimer()
    engine, (rep,) = build(monkeypatch, timer)
    # isolated, every Relu took `fast`; in the network r1..r3 (one group) run faster on `slow`, r4 does not
    assert _tactics(engine) == {"r1": "relu.slow", "r2": "relu.slow", "r3": "relu.slow", "r4": "relu.fast"}
    assert rep.groups == 2 and rep.trials == 2 and timer.calls == 2
    assert rep.kept == [{"swap": "relu.fast → relu.slow", "layers": ["r1", "r2", "r3"], "saved_ms": 0.018}]
    assert rep.base_ms == pytest.approx(0.040) and rep.final_ms == pytest.approx(0.022)
    assert engine.data.build_info["tactics"]["context"]["kept"] == rep.kept
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_allclose(engine.run({"x": x})["y"], ort_run(relu_model(), {"x": x})["y"], rtol=1e-6)


def test_a_swap_that_changes_the_outputs_is_never_kept(monkeypatch, relu_tactics):
    """The same cost model, with `slow` broken by 1 % on purpose: faster in the network, never swapped in."""
    real = context_timing.build_kernel

    def broken(layer, tid, device):
        kernel = real(layer, tid, device)
        return (lambda inputs: [kernel(inputs)[0] * 1.01]) if tid.startswith("relu.slow") else kernel
    monkeypatch.setattr(context_timing, "build_kernel", broken)
    timer = NetworkCostTimer()
    engine, (rep,) = build(monkeypatch, timer)
    assert set(_tactics(engine).values()) == {"relu.fast"} and rep.kept == [] and timer.calls == 0


def test_warm_timing_cache_reproduces_the_swaps_without_timing(monkeypatch, relu_tactics, tmp_path):
    path = str(tmp_path / "cache.json")
    first, _ = build(monkeypatch, NetworkCostTimer(), timing_cache_path=path)
    entries = TimingCache.load(path).devices
    assert any(e.get("op") == "NetworkContext" for dev in entries.values() for e in dev.values())

    class Refuses:
        def compare(self, a, b):
            raise AssertionError("a warm build timed the network again")
    second, (rep,) = build(monkeypatch, Refuses(), timing_cache_path=path)
    assert rep.from_cache and _tactics(second) == _tactics(first)


def test_a_timer_that_fails_keeps_the_layer_by_layer_choice(monkeypatch, relu_tactics):
    class OutOfMemory:
        def compare(self, a, b):
            raise RuntimeError("CUDA out of memory")
    engine, (rep,) = build(monkeypatch, OutOfMemory())
    assert set(_tactics(engine).values()) == {"relu.fast"} and "out of memory" in rep.skipped
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_allclose(engine.run({"x": x})["y"], ort_run(relu_model(), {"x": x})["y"], rtol=1e-6)


def test_a_failure_inside_the_step_never_fails_the_build(monkeypatch, relu_tactics):
    """Anything that raises in the refinement (here: the groups themselves) ends it with a warning; the build
    finishes with the layer-by-layer choice and still computes the model."""
    def broken(*a, **k):
        raise ValueError("a malformed timing entry")
    monkeypatch.setattr(context_timing, "close_calls", broken)
    engine, (rep,) = build(monkeypatch, NetworkCostTimer())
    assert rep.skipped == "failed: ValueError: a malformed timing entry"
    assert set(_tactics(engine).values()) == {"relu.fast"}
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_allclose(engine.run({"x": x})["y"], ort_run(relu_model(), {"x": x})["y"], rtol=1e-6)


def test_no_close_call_times_nothing(monkeypatch):
    monkeypatch.setitem(registry._TACTICS, "Relu", [_relu_tactic("fast"), _relu_tactic("far")])
    timer = NetworkCostTimer()
    engine, (rep,) = build(monkeypatch, timer)
    assert timer.calls == 0 and rep.skipped == "no close calls" and set(_tactics(engine).values()) == {"relu.fast"}


# ---- the whole-network program against onnxruntime -------------------------------------------------------------
def conv_model() -> bytes:
    """Conv → Relu → Conv + residual → Flatten → Gemm: weights random, so the output depends on every layer."""
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, "w1"),
             numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b1"),
             numpy_helper.from_array(rng.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.2, "w2"),
             numpy_helper.from_array(rng.standard_normal((5, 8 * 6 * 6)).astype(np.float32) * 0.1, "wf")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["s"], name="add"),
             helper.make_node("Flatten", ["s"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "wf"], ["y"], name="fc", transB=1)]
    graph = helper.make_graph(nodes, "convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


@pytest.mark.parametrize("scale, agrees", [(1.0, True), (1.01, False)])
def test_network_program_matches_onnxruntime(monkeypatch, scale, agrees):
    """The program the context timer replays computes the network: its output on its own random input equals
    onnxruntime's; with one convolution's kernel 1 % off (on purpose) it does not."""
    seen = {}

    def step(net, walk, cache, dev_key, report):
        chosen = {layer.name: layer.tactic for layer in net.layers}
        kernels = {n: context_timing.build_kernel(layer, chosen[n], walk.device)
                   for layer in net.layers if (n := layer.name) and layer.placement != "host"}
        conv = next(layer.name for layer in net.layers if "Conv" in layer.op and layer.name in kernels)
        real = kernels[conv]
        kernels[conv] = lambda inputs: [t * scale for t in real(inputs)]
        prog = NetworkProgram(net, walk, kernels, chosen)
        seen["y"] = prog.run()[0].numpy()
        seen["x"] = prog.fixed[("x", False)].numpy()
    class SameTimer:
        def measure(self, tactic_id, run):
            run()
            return tactics.Measurement([0.01] * 3)
    monkeypatch.setattr(builder_module, "choose_tactics", functools.partial(tactics.choose_tactics, timer=SameTimer()))
    monkeypatch.setattr(builder_module, "_context_step", lambda config, device: step)
    tfg.build(conv_model(), config=BuilderConfig(device="cpu", optimization_level=1), device="cpu")
    want = ort_run(conv_model(), {"x": seen["x"]})["y"]
    close = np.allclose(seen["y"], want, rtol=1e-4, atol=1e-4)
    assert close == agrees, float(np.abs(seen["y"] - want).max())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (graph capture)")
def test_cuda_build_times_its_close_calls_in_the_network():
    """A real CUDA build, fp16: the context step ran (timed its close calls, or found none, and says so) and the
    engine still computes the model (onnxruntime fp32, fp16 tolerance)."""
    engine = tfg.build(conv_model(), device="cuda", fp16=True)
    context = engine.data.build_info["tactics"].get("context")
    assert context and (context.get("trials", 0) > 0 or context.get("skipped")), context
    x = np.random.default_rng(5).standard_normal((2, 3, 6, 6)).astype(np.float32)
    got = np.asarray(engine.run({"x": x})["y"], dtype=np.float32)
    want = ort_run(conv_model(), {"x": x})["y"]
    assert np.abs(got - want).max() <= 2e-2 * np.abs(want).max()
