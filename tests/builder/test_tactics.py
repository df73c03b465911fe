"""Tactic selection by timing, on CPU with a fake timer and test tactics patched into the registry: the fastest
candidate wins, identical layers are timed once, a warm timing cache re-times nothing, --noBuilderCache times every
layer, failing or over-workspace candidates are rejected with their reason, and level 0 times nothing."""

import functools

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper

import tensorforge as tfg
from tensorforge.builder import BuilderConfig, builder as builder_module, tactics
from tensorforge.builder.timing_cache import TimingCache
from tensorforge.kernels import registry
from tensorforge.kernels.registry import Tactic

from oracle import ort_run


def relu_model() -> bytes:
    """Four Relus: r1, r2, r3 of shape (batch, 8) — identical timing questions — and r4 on (batch, 16)."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r1"), helper.make_node("Relu", ["a"], ["b"], name="r2"),
             helper.make_node("Relu", ["b"], ["c"], name="r3"),
             helper.make_node("Concat", ["c", "c"], ["d"], name="cat", axis=1),
             helper.make_node("Relu", ["d"], ["y"], name="r4")]
    graph = helper.make_graph(nodes, "relus", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


SHAPES = {"x": ((1, 8), (4, 8), (16, 8))}


class FakeTimer:
    """Times by tactic name (ms), scratch bytes by name; counts measurements; runs the kernel once per measure."""

    def __init__(self, ms: dict[str, float], scratch: dict[str, int] | None = None):
        self.ms, self.scratch, self.calls = ms, scratch or {}, []

    def measure(self, tactic_id, run):
        run()
        self.calls.append(tactic_id)
        name = tactic_id.split(".", 1)[1].split("[")[0]
        return tactics.Measurement([self.ms[name]] * 3, self.scratch.get(name, 0))


def _relu_tactic(name, fail=False):
    def build(layer, cfg, device):
        def run(inputs):
            if fail:
                raise RuntimeError("no kernel for this shape")
            return [torch.clamp(inputs[0], min=0) * 1]
        return run
    return Tactic("Relu", name, lambda layer, device: None, build, [{"BLOCK": 64}, {"BLOCK": 128}], 0)


@pytest.fixture
def test_tactics(monkeypatch):
    mine = [_relu_tactic("fast"), _relu_tactic("slow"), _relu_tactic("broken", fail=True)]
    monkeypatch.setitem(registry._TACTICS, "Relu", mine)
    return mine


def build(monkeypatch, timer, **config_kw):
    monkeypatch.setattr(builder_module, "choose_tactics", functools.partial(tactics.choose_tactics, timer=timer))
    config_kw.setdefault("optimization_level", 1)          # timing on, pointwise fusion off: the Relus stay layers
    config_kw.setdefault("point_tactics", False)           # one timing pass (the opt point): the counts below
    config = BuilderConfig(device="cpu", profiles=tfg.api.high_level._as_profile(SHAPES), **config_kw)
    return tfg.build(relu_model(), config=config, device="cpu")


def test_fastest_wins_and_identical_layers_are_timed_once(monkeypatch, test_tactics):
    timer = FakeTimer({"fast": 0.1, "slow": 0.5, "torch_ref": 0.3})
    engine = build(monkeypatch, timer)
    relus = [layer for layer in engine.data.layers if layer.op == "Relu"]
    assert [layer.tactic for layer in relus] == ["relu.fast[BLOCK=64]"] * 4       # first of equal times: config 1
    # two distinct timing questions (r1..r3 share one; r4 has 16 columns) × 5 runnable candidates each
    assert len(timer.calls) == 2 * 5 and not any("broken" in c for c in timer.calls)
    stats = engine.data.build_info["tactics"]
    assert stats["timed_layers"] == 2 and stats["cache_hits"] == 2 and stats["measurements"] == 10
    x = np.random.default_rng(1).standard_normal((5, 8)).astype(np.float32)
    np.testing.assert_array_equal(engine.run({"x": x})["y"], ort_run(relu_model(), {"x": x})["y"])


def test_failed_candidates_are_rejected_with_their_reason(monkeypatch, test_tactics):
    got = {}
    real = tactics._choose_timed

    def spy(layer, found, walk, timer, cache, dev_key, config, report):
        real(layer, found, walk, timer, cache, dev_key, config, report)
        got.update(report.rejected.get(layer.name, {}))
    monkeypatch.setattr(tactics, "_choose_timed", spy)
    build(monkeypatch, FakeTimer({"fast": 0.1, "slow": 0.5, "torch_ref": 0.3}))
    assert got["relu.broken[BLOCK=64]"] == "failed at the opt-point shapes: RuntimeError: no kernel for this shape"


def test_warm_cache_retimes_nothing(monkeypatch, test_tactics, tmp_path):
    path = str(tmp_path / "cache.json")
    cold = FakeTimer({"fast": 0.1, "slow": 0.5, "torch_ref": 0.3})
    first = build(monkeypatch, cold, timing_cache_path=path)
    assert len(cold.calls) == 10 and len(TimingCache.load(path)) == 2
    warm = FakeTimer({"fast": 9.0, "slow": 9.0, "torch_ref": 9.0})     # would change the choice if consulted
    before = (tmp_path / "cache.json").stat().st_mtime_ns, (tmp_path / "cache.json").read_bytes()
    second = build(monkeypatch, warm, timing_cache_path=path)
    assert warm.calls == []
    assert ((tmp_path / "cache.json").stat().st_mtime_ns, (tmp_path / "cache.json").read_bytes()) == before
    assert second.data.build_info["tactics"]["cache_hits"] == 4
    assert [layer.tactic for layer in second.data.layers] == [layer.tactic for layer in first.data.layers]


def test_no_builder_cache_times_every_layer(monkeypatch, test_tactics, tmp_path):
    timer = FakeTimer({"fast": 0.1, "slow": 0.5, "torch_ref": 0.3})
    build(monkeypatch, timer, use_timing_cache=False, timing_cache_path=str(tmp_path / "c.json"))
    assert len(timer.calls) == 4 * 5 and not (tmp_path / "c.json").exists()


def test_workspace_limit_rejects_hungry_tactics(monkeypatch, test_tactics):
    timer = FakeTimer({"fast": 0.1, "slow": 0.5, "torch_ref": 0.3}, scratch={"fast": 1 << 20})
    engine = build(monkeypatch, timer, workspace_bytes=1 << 10)
    assert {layer.tactic for layer in engine.data.layers if layer.op == "Relu"} == {"any.torch_ref"}


def test_level_zero_and_cpu_builds_time_nothing(monkeypatch, test_tactics):
    timer = FakeTimer({"fast": 0.1, "slow": 0.5, "torch_ref": 0.3})
    engine = build(monkeypatch, timer, optimization_level=0)
    assert timer.calls == [] and engine.data.build_info["tactics"]["untimed_layers"] == len(engine.data.layers)
    monkeypatch.setattr(builder_module, "choose_tactics", tactics.choose_tactics)      # the real path, no timer
    plain = tfg.build(relu_model(), device="cpu", shapes=SHAPES, optimization_level=1)   # CPU: priority order
    assert plain.data.build_info["tactics"]["timed_layers"] == 0
    assert {layer.tactic for layer in plain.data.layers if layer.op == "Relu"} == {"relu.fast[BLOCK=64]"}


def test_timing_inputs_follow_producer_strides(monkeypatch):
    """A producer that emits transposed (column-major) tensors: its consumer is timed on those strides."""
    seen = []

    def build_t(layer, cfg, device):
        return lambda inputs: [torch.clamp(inputs[0], min=0).t().contiguous().t()]     # same values, strides (1, n)

    def build_probe(layer, cfg, device):
        def run(inputs):
            seen.append((layer.name, inputs[0].stride()))
            return [torch.clamp(inputs[0], min=0)]
        return run
    monkeypatch.setitem(registry._TACTICS, "Relu", [Tactic("Relu", "colmajor", lambda l, d: None, build_t, [{}], 0),
                                                    Tactic("Relu", "probe", lambda l, d: None, build_probe, [{}], 0)])
    timer = FakeTimer({"colmajor": 0.1, "probe": 0.2, "torch_ref": 0.3})
    build(monkeypatch, timer, use_timing_cache=False)
    first = [s for name, s in seen if name.startswith("r1")]
    second = [s for name, s in seen if name.startswith("r2")]
    assert first and all(s == (8, 1) for s in first)             # the network input: contiguous (4, 8)
    assert second and all(s == (1, 4) for s in second)           # r1 chose colmajor → r2 sees column-major


def test_a_fast_but_wrong_tactic_is_rejected_by_the_reference(monkeypatch):
    """Every timed candidate is first checked against the op's torch reference on the timing inputs: a tactic
    that is fastest but computes the wrong thing (here: forgets the clamp) never wins, and its reason is kept."""
    def wrong_build(layer, cfg, device):
        return lambda inputs: [inputs[0] * 1.0]          # identity, not relu
    mine = [Tactic("Relu", "wrong", lambda layer, device: None, wrong_build, [{}], 0), _relu_tactic("slow")]
    monkeypatch.setitem(registry._TACTICS, "Relu", mine)
    got = {}
    real = tactics._choose_timed

    def spy(layer, found, walk, timer, cache, dev_key, config, report):
        real(layer, found, walk, timer, cache, dev_key, config, report)
        got.update(report.rejected.get(layer.name, {}))
    monkeypatch.setattr(tactics, "_choose_timed", spy)
    timer = FakeTimer({"wrong": 0.01, "slow": 0.5, "torch_ref": 0.3})
    engine = build(monkeypatch, timer)
    assert all(layer.tactic != "relu.wrong" for layer in engine.data.layers)
    assert "wrong" not in " ".join(timer.calls)
    assert got["relu.wrong"].startswith("wrong results at the opt-point shapes: output 0: max |err|")
    x = np.random.default_rng(2).standard_normal((5, 8)).astype(np.float32)
    np.testing.assert_array_equal(engine.run({"x": x})["y"], ort_run(relu_model(), {"x": x})["y"])


def test_a_config_that_does_not_fit_the_inputs_is_not_timed(monkeypatch):
    """Tactic.fits judges each config on the opt-point inputs: BLOCK=128 does not fit rows of 16 columns, so r4
    (16 columns) times only BLOCK=64, while r1..r3 (8 columns) time both."""
    def fits(layer, cfg, inputs):
        return "too wide for 16 columns" if cfg["BLOCK"] == 128 and inputs[0].shape[-1] == 16 else None
    fast = _relu_tactic("fast")
    monkeypatch.setitem(registry._TACTICS, "Relu", [Tactic("Relu", "fast", fast.supports, fast.build, fast.configs,
                                                           0, fits)])
    timer = FakeTimer({"fast": 0.1, "torch_ref": 0.3})
    build(monkeypatch, timer)
    assert sorted(timer.calls) == sorted(["relu.fast[BLOCK=64]", "relu.fast[BLOCK=128]", "any.torch_ref",
                                          "relu.fast[BLOCK=64]", "any.torch_ref"])


def test_triton_gemm_skinny_configs_fit_only_few_rows():
    from tensorforge.kernels.triton_gemm import CONFIGS, SKINNY_ROWS, TritonGemmEpilogue
    skinny, wide = CONFIGS[6], CONFIGS[3]
    assert skinny["BM"] == 16 and wide["BM"] == 64
    few, many = torch.empty(1, SKINNY_ROWS, 32), torch.empty(2, SKINNY_ROWS, 32)
    assert TritonGemmEpilogue.fits(None, skinny, [few]) is None
    assert "at most 64 rows (this one has 128)" in TritonGemmEpilogue.fits(None, skinny, [many])
    assert TritonGemmEpilogue.fits(None, wide, [many]) is None


def test_build_report_names_the_slowest_timed_layers(monkeypatch, test_tactics):
    """The build-cost diagnosis: the timed layers (r1 and r4: the other Relus hit the timing cache), each with its
    op, candidate count and seconds, longest first. A timer that sleeps 30 ms per candidate on r4's question makes
    r4 the slowest, by at least 5 × 30 ms (its runnable candidates; 7 with the two failing configs) — a closed form of the sleeps."""
    import time

    class SlowOnWide(FakeTimer):
        def measure(self, tactic_id, run):
            out = super().measure(tactic_id, run)
            if run()[0].shape[1] == 16:
                time.sleep(0.03)
            return out
    engine = build(monkeypatch, SlowOnWide({"fast": 0.1, "slow": 0.5, "torch_ref": 0.3}))
    rows = engine.data.build_info["tactics"]["slowest_layers"]
    assert [r["layer"] for r in rows] == ["r4", "r1"]
    assert rows[0]["op"] == "Relu" and rows[0]["candidates"] == 7 and rows[0]["seconds"] >= 5 * 0.03
    assert rows[1]["seconds"] < rows[0]["seconds"]
    t = engine.data.build_info["tactics"]     # the sleeps land in timing_s; the phases add up to the whole
    assert t["timing_s"] >= 5 * 0.03 and t["queue_s"] == 0.0      # no compile workers on the CPU
    parts = t["compile_wait_s"] + t["timing_s"] + t["queue_s"] + t["other_s"]
    assert abs(t["seconds"] - parts) < 0.005, t
