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
