"""bench/find_precision_spec.py end to end on the CPU on the tiny stand-in CNN: with a cosine target the plain INT8
engine misses, `debug precision` finds a spec, the script records it, and precision_case's `int8-spec` row built from
the record meets the target against fp32 onnxruntime (the oracle) with the cosine the search reported (the same
calibration images, the same test images)."""

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
pytest.importorskip("onnxruntime")
precision_case = pytest.importorskip("precision_case")
find_precision_spec = pytest.importorskip("find_precision_spec")
zoo = pytest.importorskip("zoo")


def _rows(data, precisions):
    return {r["precision"]: r for r in precision_case.run_model(
        "tiny_cnn", data, [2], precisions, iters=1, warmup=0, cache_path=None, log=lambda *_: None, device="cpu",
        ort_threads=1)}


def test_recorded_spec_reproduces_in_the_bench_row(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(precision_case, "SPECS_FILE", tmp_path / "specs.json")
    data, _ = zoo.export("tiny_cnn", zoo.make("tiny_cnn"))
    plain = _rows(data, ["int8"])["int8"]["accuracy_vs_ort_fp32"]["cosine"]
    target = round(1 - (1 - plain) / 4, 7)                      # plain INT8 misses it; fp16 everywhere meets it
    assert plain < target < 1
    assert find_precision_spec.main(["tiny_cnn", "--precisions", "int8", f"--cosine={target}", "--runs=1"]) == 0
    rec = json.loads(precision_case.SPECS_FILE.read_text())["tiny_cnn"]["int8"]
    assert rec["spec"].endswith(":fp16") and rec["cosine_target"] == target and "--keep=fp16" in rec["command"]
    found = float(re.search(r"cosine ([0-9.]+)", rec["found"]).group(1))
    row = _rows(data, ["int8-spec"])["int8-spec"]
    assert row["layer_precisions"] == rec["spec"]
    cos = row["accuracy_vs_ort_fp32"]["cosine"]
    assert cos >= target and cos == pytest.approx(found, abs=1e-5)
    assert "recorded in specs.json" in capsys.readouterr().out
