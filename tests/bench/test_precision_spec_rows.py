"""precision_case's `int8-spec` rows: the INT8 engine built with the model's recorded --layerPrecisions spec keeps
the named layer in float (the others stay quantized), the row carries the spec and its accuracy against fp32
onnxruntime (the oracle, inside run_model), and a model with no recorded spec gets a row saying how to make one."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
pytest.importorskip("onnxruntime")
precision_case = pytest.importorskip("precision_case")
zoo = pytest.importorskip("zoo")

KEPT = "/features/features.0/Conv"


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    specs = tmp_path / "precision_specs.json"
    specs.write_text(json.dumps({"tiny_cnn": {"int8": {"spec": f"{KEPT}:fp16", "found": "by hand"}}}))
    monkeypatch.setattr(precision_case, "SPECS_FILE", specs)
    data, _ = zoo.export("tiny_cnn", zoo.make("tiny_cnn"))
    return data


def _kinds(engine):
    return {o: la.op for la in engine.data.layers for o in la.origin if "Conv" in o or "Gemm" in o}


def test_spec_build_keeps_the_named_layer_float_and_quantizes_the_rest(tiny):
    plain = precision_case.build_engine(tiny, "tiny_cnn", 2, "int8", "cpu", None)
    spec = precision_case.build_engine(tiny, "tiny_cnn", 2, "int8-spec", "cpu", None)
    before, after = _kinds(plain), _kinds(spec)
    assert before[KEPT].startswith("Quantized")
    assert not after[KEPT].startswith("Quantized")
    assert after["/features/features.3/Conv"].startswith("Quantized")
    assert "int8" in spec.data.build_info["flags"] and "precisionConstraints=obey" in spec.data.build_info["flags"]


def test_spec_row_reports_spec_accuracy_and_speed_and_a_missing_spec_is_not_run(tiny, monkeypatch):
    rows = precision_case.run_model("tiny_cnn", tiny, [2], ["int8-spec", "fp8-spec"], iters=2, warmup=0,
                                    cache_path=None, log=lambda *_: None, device="cpu", ort_threads=1)
    by = {r["precision"]: r for r in rows}
    assert set(by) == {"fp16", "int8-spec", "fp8-spec"}
    row = by["int8-spec"]
    assert row["layer_precisions"] == f"{KEPT}:fp16"
    assert row["accuracy_vs_ort_fp32"]["samples"] == precision_case.TEST_INPUTS
    assert row["accuracy_vs_ort_fp32"]["cosine"] > 0.99 and row["median_ms"] > 0 and row["speedup_vs_fp16"] > 0
    assert by["fp8-spec"]["error"].startswith("not run: LookupError: no debug-precision spec recorded for tiny_cnn")
    assert "find_precision_spec.py" in by["fp8-spec"]["error"]


def test_the_plan_sets_no_budget_aside_for_a_spec_row_with_no_spec(tiny, monkeypatch, capsys):
    """bench/run.py's plan: a `-spec` row of a model with a recorded spec is a case (with its estimate); one with
    none is not planned (it would only say 'no spec' yet took a build's estimate from the budget), and says so."""
    run = pytest.importorskip("run")
    assert run.main(["--part", "precision", "--models", "tiny_cnn", "--precisions", "int8-spec,fp8-spec",
                     "--precision-batches", "2", "--device", "cpu", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "precision tiny_cnn b2 int8-spec" in out
    assert "precision tiny_cnn b2 fp8-spec" not in out
    assert "not planned: precision tiny_cnn fp8-spec: no debug-precision spec recorded" in out


def test_onnxruntime_references_run_once_per_model(tiny, monkeypatch):
    """Each batch's rows are scored against the same fp32 onnxruntime outputs (the test inputs do not depend on
    the batch): computed once per model and file in a run, and a different file is computed again."""
    monkeypatch.setattr(precision_case, "_ORT_SCORES", {})
    calls = []
    real = precision_case.ort_reference

    def counted(data, xs, threads):
        calls.append(len(data))
        return real(data, xs, threads)
    monkeypatch.setattr(precision_case, "ort_reference", counted)
    kw = dict(iters=2, warmup=0, cache_path=None, log=lambda *_: None, device="cpu", ort_threads=1)
    a = precision_case.run_model("tiny_cnn", tiny, [1], [], **kw)
    b = precision_case.run_model("tiny_cnn", tiny, [2], [], **kw)
    assert len(calls) == 1
    assert a[0]["accuracy_vs_ort_fp32"]["cosine"] > 0.999 and b[0]["accuracy_vs_ort_fp32"]["cosine"] > 0.999
    import onnx
    from onnx import numpy_helper
    model = onnx.load_from_string(tiny)               # the same model with other weights: its own reference
    w = model.graph.initializer[0]
    w.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(w) * 2, w.name))
    precision_case.run_model("tiny_cnn", model.SerializeToString(), [1], [], **kw)
    assert len(calls) == 2
