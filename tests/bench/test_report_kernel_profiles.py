"""report.py's kernel-profile section: only rows above 0.8 of the strongest peer get one, each with our engine's and
the strongest peer's wall / kernel / gap figures and top kernels (synthetic rows; the numbers are the oracle)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import report  # noqa: E402


def _table(wall, kern, name):
    return {"wall_us": wall, "kernel_us": kern, "gap_us": round(wall - kern, 1), "kernels": 50.0,
            "top": [{"kernel": name, "per_inference": 4.0, "us": kern * 0.5}]}


def _row(model, ratio):
    return {"model": model, "batch": 1, "dtype": "fp16", "ratio_vs_strongest": ratio, "strongest_peer": "freeze+graph",
            "kernel_profiles": {"tensorforge": _table(300.0, 280.0, "_gemm_kernel"),
                                "freeze+graph": _table(320.0, 310.0, "triton_poi_fused")}}


def test_only_misses_get_a_profile_with_both_runners():
    lines = report._kernel_profiles([_row("slow", 0.93), _row("fast", 0.75)])
    text = "\n".join(lines)
    assert "### slow b1 fp16: tf / strongest 0.93" in text and "fast b1" not in text
    assert "| tensorforge | 300.0 | 280.0 | 20.0 | 50 |" in text
    assert "| freeze+graph | 320.0 | 310.0 | 10.0 | 50 |" in text
    assert "140.0 µs ×4 `_gemm_kernel`" in text and "155.0 µs ×4 `triton_poi_fused`" in text


def test_no_section_without_misses():
    assert report._kernel_profiles([_row("fast", 0.5)]) == []
