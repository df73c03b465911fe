"""bench/report.py's precision table: the onnxruntime-INT8 column and the --best note, on rows written by hand."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
report = pytest.importorskip("report")


def _row(precision, **extra):
    return {"model": "m", "batch": 1, "precision": precision, "runner": {"median_ms": 1.0, "spread_pct": 0},
            "throughput_per_s": 1000.0, "speedup_vs_fp16": 1.0,
            "accuracy_vs_ort_fp32": {"samples": 4, "cosine": 0.995, "min_sample_cosine": 0.99, "pass": True},
            **extra}


def test_ort_int8_column_and_best_note():
    rows = [_row("int8", ort_int8_accuracy={"cosine": 0.98123, "top1_agreement": 0.75}),
            _row("int8", ort_int8_accuracy={"note": "onnxruntime could not quantize or run it: X"}),
            _row("best", build={"best": {"kept": "fp16", "mixed_ms": 0.49, "fp16_ms": 0.43}}),
            _row("best", build={"best": {"kept": "mixed", "mixed_ms": 0.30, "fp16_ms": 0.43}})]
    table = [line for line in report._precision_table(rows) if line.startswith("| m |")]
    assert "| cos 0.9812, top-1 75.0% |" in table[0]
    assert "| n/a: onnxruntime could not quantize or run it: X |" in table[1]
    assert "best (FP16 engine kept, 0.4900 vs 0.4300 ms in the build)" in table[2]
    assert "best (INT8/FP16 mixed engine kept, 0.3000 vs 0.4300 ms in the build)" in table[3]
    assert all(line.count("|") == table[0].count("|") for line in table)


def test_precision_plot_data_and_file(tmp_path):
    """The plot's bars are the rows' own ratios, in the table's order; a FAIL is marked; fp16 and errored rows
    draw nothing; a group with only fp16 draws no group."""
    def row(model, batch, precision, speed, ok=True, **extra):
        return dict(_row(precision, speedup_vs_fp16=speed, **extra), model=model, batch=batch,
                    accuracy_vs_ort_fp32={"samples": 4, "cosine": 0.995 if ok else 0.98, "min_sample_cosine": 0.97,
                                          "pass": ok})
    rows = [row("a", 1, "fp16", 1.0), row("a", 1, "int8", 0.83, ok=False), row("a", 1, "best", 1.07),
            row("a", 32, "fp16", 1.0), {"model": "a", "batch": 32, "precision": "int8", "error": "not run: x"},
            row("b", 1, "fp16", 1.0), row("b", 1, "fp8", 0.92)]
    groups, bars = report.precision_bars(rows)
    assert groups == ["a\nb1", "b\nb1"]
    assert bars["int8"] == [(0.83, False), None] and bars["best"] == [(1.07, True), None]
    assert bars["fp8"] == [None, (0.92, True)] and bars["int8-spec"] == [None, None]
    files = report.write({"environment": {"gpu": "G"}, "zoo": [], "precision": rows}, str(tmp_path), "t")
    assert str(tmp_path / "t-precision.png") in files and (tmp_path / "t-precision.png").stat().st_size > 1000
