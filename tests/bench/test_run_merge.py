"""bench/run.py --append: rows measured now replace the same cases of the earlier results; the others, the GELU
rows and the build cost of the earlier run are kept, and the earlier environment is recorded."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import run  # noqa: E402


def _res(rows, gelu=(), build=None, env="now"):
    return {"environment": {"gpu": env}, "gelu": [{"dtype": d} for d in gelu], "build_cost": build, "skipped": [],
            "zoo": [{"model": m, "batch": b, "dtype": "fp16", "ms": ms} for m, b, ms in rows]}


def test_merge_keeps_unmeasured_rows_and_replaces_measured_ones():
    old = _res([("vit", 1, 1.0), ("vit", 32, 2.0), ("gpt2", 1, 3.0)], gelu=("float32",), build={"cold": 4}, env="old")
    new = _res([("vit", 1, 0.5), ("gpt2", 1, 2.5)])
    out = run._merge_previous(new, old)
    rows = {(r["model"], r["batch"]): r["ms"] for r in out["zoo"]}
    assert rows == {("vit", 1): 0.5, ("vit", 32): 2.0, ("gpt2", 1): 2.5}
    assert out["gelu"] == [{"dtype": "float32"}] and out["build_cost"] == {"cold": 4}
    assert out["environment"]["earlier_runs"] == [{"gpu": "old"}]


def test_merge_drops_not_run_entries_for_cases_that_have_rows_and_labels_rows_by_run():
    import report
    old = _res([("vit", 32, 2.0)], env="old")
    old["skipped"] = ["vit b32 fp16: time budget spent", "gpt2 b1 fp16: time budget spent",
                      "vit (all cases): time budget spent"]
    for row in old["zoo"]:
        row["run"] = "abc123"
    new = _res([("vit", 1, 0.5)])
    run._label_rows(new, "def456")
    out = run._merge_previous(new, old)
    assert out["skipped"] == ["gpt2 b1 fp16: time budget spent"]
    assert "- abc123: vit b32 fp16" in report._provenance(out) and "- def456: vit b1 fp16" in report._provenance(out)
