"""bench/prewarm.py then bench/run.py --prewarmed --backend, on the CPU on the tiny stand-in CNN: the run reads the
prewarm's export and reports its cold build times (oracle: the prewarm's own job file), the tf-backend runner is
timed and checked against onnxruntime but never counted as the strongest peer, and a backend whose output is 1 %
off fails its accuracy check (a planted error)."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
pytest.importorskip("onnxruntime")
run = pytest.importorskip("run")
prewarm = pytest.importorskip("prewarm")


@pytest.fixture(scope="module")
def prewarmed(tmp_path_factory):
    cache = tmp_path_factory.mktemp("prewarm")
    assert prewarm.main(["--cache-dir", str(cache), "--models", "tiny_cnn", "--batches", "1", "--dtypes", "fp16",
                         "--peers", "backend", "--device", "cpu", "--workers", "1", "--budget-s", "300"]) == 0
    out = tmp_path_factory.mktemp("bench")
    assert run.main(["--device", "cpu", "--models", "tiny_cnn", "--batches", "1", "--peers", "eager", "--iters", "3",
                     "--warmup", "1", "--ort-threads", "1", "--label", "pw", "--prewarmed", str(cache), "--backend",
                     "--out-dir", str(out), "--stem", "t"]) == 0
    return cache, json.loads((out / "t.json").read_text()), (out / "t.md").read_text()


def test_the_run_reports_the_prewarms_cold_times_and_uses_its_export(prewarmed):
    cache, res, md = prewarmed
    job = json.loads((cache / "jobs" / "tiny_cnn_1_fp16.json").read_text())
    (b,) = res["build_costs"]
    assert b["cold_s"] == job["tensorforge_build_s"] and b["backend_compile_s"] == job["backend_compile_s"]
    assert b["timing_cold_s"] > 0 and b["cold_source"].startswith("prewarm: 1 jobs at a time")
    meta = json.loads((cache / "exports" / "tiny_cnn.onnx.json").read_text())
    assert res["zoo"][0]["exporter"] == meta["exporter"]
    assert res["environment"]["prewarm"]["jobs_ok"] == ["tiny_cnn:1:fp16"]
    assert "Prewarmed (bench/prewarm.py: 1 jobs" in md and "timing-only s" in md


def test_the_backend_runner_is_timed_checked_and_never_the_strongest_peer(prewarmed):
    _, res, md = prewarmed
    row = res["zoo"][0]
    be = row["runners"]["tf-backend"]
    assert be["median_ms"] > 0 and be["engines"] >= 1 and be["graph_breaks"] == []
    assert be["accuracy_vs_ort_fp32"]["pass"] is True
    assert row["strongest_peer"] == "eager"
    assert row["backend_vs_strongest"] == round(be["median_ms"] / row["runners"]["eager"]["median_ms"], 3)
    assert "| tensorforge | tf-backend | eager |" in md


def test_strongest_leaves_out_both_of_ours():
    import peers
    runners = {"tensorforge": {"median_ms": 0.5}, "tf-backend": {"median_ms": 0.1}, "eager": {"median_ms": 2.0},
               "compile+graph": {"median_ms": 1.0}}
    assert peers.strongest(runners) == ("compile+graph", 1.0)
    r = peers.ratios(runners)
    assert r["ratio_vs_strongest"] == 0.5 and r["backend_vs_strongest"] == 0.1 and r["backend_vs_onnx_engine"] == 0.2


def test_a_backend_one_percent_off_fails_its_accuracy_check():
    import torch

    import backend_runner
    import measure
    import zoo
    model = zoo.make("tiny_cnn")
    x = zoo.example("tiny_cnn", 2)
    with torch.no_grad():
        want = model(x).numpy()

    class Off(torch.nn.Module):            # the planted error: every output 1 % too large
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x) * 1.01
    time_fn = measure.timer("cpu", 2, 1)
    good = backend_runner.time_backend(model, x, False, time_fn, print, want)
    bad = backend_runner.time_backend(Off(model), x, False, time_fn, print, want)
    assert good["accuracy_vs_ort_fp32"]["allclose_1e-3_1e-4"] is True      # fp32: allclose(1e-3, 1e-4)
    assert bad["accuracy_vs_ort_fp32"]["allclose_1e-3_1e-4"] is False
    assert np.isfinite(bad["median_ms"])


def test_warm_estimates_are_below_cold_ones():
    import plan
    peers = ["compile", "freeze+graph"]
    assert plan.zoo_case_s("resnet50", 32, "fp16", peers, False, warm=True) < plan.zoo_case_s("resnet50", 32, "fp16",
                                                                                               peers, False)
    assert plan.build_cost_s("mobilenet_v3_large", warm=True) < plan.build_cost_s("mobilenet_v3_large")


def test_precision_jobs_build_the_rows_quantized_engines(tmp_path):
    """--dtypes int8 (with --peers ""): the job builds the precision row's calibrated INT8 engine — the build whose
    Triton variants the row would otherwise compile — and compiles no torch peer."""
    assert prewarm.main(["--cache-dir", str(tmp_path), "--models", "tiny_cnn", "--batches", "1", "--dtypes",
                         "fp16,int8", "--peers", "", "--device", "cpu", "--workers", "2", "--budget-s", "300"]) == 0
    int8 = json.loads((tmp_path / "jobs" / "tiny_cnn_1_int8.json").read_text())
    fp16 = json.loads((tmp_path / "jobs" / "tiny_cnn_1_fp16.json").read_text())
    assert int8["tensorforge_build_s"] > 0 and "int8" in int8["engine_flags"]
    assert fp16["tensorforge_build_s"] > 0 and not any(k.endswith("_compile_s") for k in fp16)
    summary = json.loads((tmp_path / "prewarm.json").read_text())
    assert {k: v["status"] for k, v in summary["results"].items()} == {"tiny_cnn:1:fp16": "ok", "tiny_cnn:1:int8": "ok"}
