"""--best picks INT8 or FP16 per layer by timing two trial builds (builder/best.py), here on the CPU with a timing
cache (which turns timing on); the final engine follows the measured costs and stays close to onnxruntime."""

import numpy as np
import torch

from oracle import ort_run
from precision_models import cosine, images, small_cnn
from tensorforge.builder import BuilderConfig, build_engine
from tensorforge.builder.calibration import configure
from tensorforge.builder.timing_cache import TimingCache
from tensorforge.parser import parse_model
from tensorforge.runtime import ExecutionContext


def test_best_follows_the_measured_costs():
    cfg = configure(BuilderConfig(device="cpu", timing_cache=TimingCache()), best=True,
                    data=[{"x": b} for b in images(4, seed=1)])
    engine = build_engine(parse_model(small_cnn()), cfg)
    best, quant = engine.build_info["best"], engine.build_info["quantization"]
    assert best["costs_ms"], "every candidate timed in both trial builds"
    for node, c in best["costs_ms"].items():
        assert (node in best["fp16_layers"]) == (c["fp16"] < c["int8"]), (node, c)
    for node in ("conv1", "conv2", "fc"):
        quantized = any(node in la.origin and la.op.startswith("Quantized") for la in engine.layers)
        assert quantized == (node not in best["fp16_layers"]), node
        assert quantized == (node in quant["layers"])
    x = images(1, seed=7)[0]
    got = ExecutionContext(engine, torch.device("cpu")).run({"x": torch.from_numpy(x)})["y"].numpy()
    assert cosine(got, ort_run(small_cnn(), {"x": x})["y"]) > 0.99


def test_best_without_timing_quantizes_every_layer():
    cfg = configure(BuilderConfig(device="cpu"), best=True, data=[{"x": b} for b in images(2, seed=1)])
    engine = build_engine(parse_model(small_cnn()), cfg)
    assert "best" not in engine.build_info and engine.build_info["quantization"]["layers"] == ["conv1", "conv2", "fc"]
    assert np.isfinite(ExecutionContext(engine, torch.device("cpu")).run(
        {"x": torch.from_numpy(images(1, seed=3)[0])})["y"].numpy()).all()


class _Timer:
    """A stand-in for context_timing.GraphPairTimer (which replays CUDA graphs): fixed medians (mixed, fp16)."""

    def __init__(self, times):
        self.times, self.calls = times, []

    def compare(self, a, b):
        self.calls.append((a, b))
        if isinstance(self.times, Exception):
            raise self.times
        return self.times


def test_compare_with_fp16_keeps_the_mixed_engine_only_when_it_is_faster():
    from tensorforge.builder.best import GAIN, BestChoice, compare_with_fp16
    for times, kept in [((0.9, 1.0), "mixed"), ((1.0, 0.9), "fp16"), ((1.0 - GAIN / 2, 1.0), "fp16"),
                        ((1.0 - 2 * GAIN, 1.0), "mixed")]:
        choice = BestChoice(fp16_program="fp16 program")
        timer = _Timer(times)
        verdict = compare_with_fp16(choice, "mixed program", timer)
        assert verdict["kept"] == kept and (verdict["mixed_ms"], verdict["fp16_ms"]) == times, times
        assert timer.calls == [("mixed program", "fp16 program")] and choice.fp16_program is None
    for timer, why in [(_Timer(None), "CUDA graph"), (_Timer(RuntimeError("out of memory")), "out of memory")]:
        verdict = compare_with_fp16(BestChoice(fp16_program="p"), "q", timer)
        assert verdict["kept"] == "mixed" and why in verdict["why"]
    assert compare_with_fp16(BestChoice(), "q", _Timer((1.0, 0.5)))["kept"] == "mixed"      # nothing to compare


def _best_engine(monkeypatch, times):
    """A --best build on the CPU whose whole-network comparison (CUDA-only in a real build) is switched on, with
    the stand-in timer's medians."""
    from tensorforge.builder import best, builder
    monkeypatch.setattr(best, "compares_networks", lambda device: True)
    monkeypatch.setattr(builder, "GraphPairTimer", lambda device: _Timer(times))
    cfg = configure(BuilderConfig(device="cpu", timing_cache=TimingCache()), best=True,
                    data=[{"x": b} for b in images(4, seed=1)])
    return build_engine(parse_model(small_cnn()), cfg)


def test_a_slower_mixed_network_gives_the_fp16_engine(monkeypatch):
    engine = _best_engine(monkeypatch, (2.0, 1.0))
    best = engine.build_info["best"]
    assert best["kept"] == "fp16" and best["fp16_layers"] == "all" and "best" in engine.build_info["flags"]
    assert not any(la.op.startswith("Quantized") or la.op in ("QuantizeLinear", "DequantizeLinear")
                   for la in engine.layers)
    x = images(1, seed=7)[0]
    got = ExecutionContext(engine, torch.device("cpu")).run({"x": torch.from_numpy(x)})["y"].numpy()
    np.testing.assert_allclose(got, ort_run(small_cnn(), {"x": x})["y"], rtol=1e-2, atol=1e-2)


def test_a_faster_mixed_network_is_kept(monkeypatch):
    engine = _best_engine(monkeypatch, (0.5, 1.0))
    best = engine.build_info["best"]
    assert best["kept"] == "mixed" and best["mixed_ms"] == 0.5
    quantized = [la for la in engine.layers if la.op.startswith("Quantized")]
    assert len(quantized) == 3 - len(best["fp16_layers"])


def test_cuda_best_times_its_network_against_the_fp16_engine():
    import pytest
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA (the whole-network comparison replays CUDA graphs)")
    from tensorforge.builder.best import GAIN
    cfg = configure(BuilderConfig(device="cuda"), best=True, data=[{"x": b} for b in images(4, seed=1)])
    engine = build_engine(parse_model(small_cnn()), cfg)
    best = engine.build_info["best"]
    assert best["mixed_ms"] > 0 and best["fp16_ms"] > 0, best
    assert (best["kept"] == "mixed") == (best["mixed_ms"] < best["fp16_ms"] * (1 - GAIN))
    quantized = any(la.op.startswith("Quantized") for la in engine.layers)
    assert quantized == (best["kept"] == "mixed" and len(best["fp16_layers"]) < 3)
    x = images(1, seed=7)[0]
    got = ExecutionContext(engine, torch.device("cuda")).run({"x": torch.from_numpy(x).cuda()})["y"].float().cpu()
    assert cosine(got.numpy(), ort_run(small_cnn(), {"x": x})["y"]) > 0.99


def test_an_int8_layer_constraint_turns_the_fp16_fallback_off(monkeypatch):
    """--layerPrecisions=fc:int8 with --best: the FP16 engine would break the constraint, so no FP16 trial program is
    kept for the comparison (the mixed engine stands) and the constraint is met."""
    from tensorforge.builder import best, builder
    monkeypatch.setattr(best, "compares_networks", lambda device: True)
    monkeypatch.setattr(builder, "GraphPairTimer", lambda device: _Timer((2.0, 1.0)))
    cfg = configure(BuilderConfig(device="cpu", timing_cache=TimingCache(), layer_precisions=[("fc", "int8")],
                                  precision_constraints="obey"), best=True, data=[{"x": b} for b in images(4, seed=1)])
    engine = build_engine(parse_model(small_cnn()), cfg)
    assert "kept" not in engine.build_info["best"]
    assert any("fc" in la.origin and la.op.startswith("Quantized") for la in engine.layers)


def test_the_trials_start_from_the_users_timing_cache_and_fill_it(tmp_path, monkeypatch):
    """A second --best build with the cache the first one filled re-times nothing: its per-layer costs are the
    first build's exactly (re-timed, CPU timings never repeat to the last bit), and its choices follow. With a
    --timingCacheFile the trials' entries reach the file."""
    tc = TimingCache()
    data = [{"x": b} for b in images(4, seed=1)]
    first = build_engine(parse_model(small_cnn()), configure(BuilderConfig(device="cpu", timing_cache=tc), best=True,
                                                              data=data))
    assert len(tc) > 0
    second = build_engine(parse_model(small_cnn()), configure(BuilderConfig(device="cpu", timing_cache=tc),
                                                               best=True, data=data))
    a, b = first.build_info["best"], second.build_info["best"]
    assert a["costs_ms"] and a["costs_ms"] == b["costs_ms"] and a["fp16_layers"] == b["fp16_layers"]
    assert [la.tactic for la in first.layers] == [la.tactic for la in second.layers]
    from tensorforge.builder import best
    trials, real = [], best._keep_trial_timings
    monkeypatch.setattr(best, "_keep_trial_timings", lambda config, caches: (trials.extend(caches),
                                                                            real(config, caches)))
    path = tmp_path / "cache.json"
    build_engine(parse_model(small_cnn()), configure(BuilderConfig(device="cpu", timing_cache_path=str(path)),
                                                     best=True, data=data))
    keys = lambda c: {(d, k) for d, entries in c.devices.items() for k in entries}      # noqa: E731
    assert len(trials) == 2 and keys(trials[0]) | keys(trials[1]) <= keys(TimingCache.load(path))
