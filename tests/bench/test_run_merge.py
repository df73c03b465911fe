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


def test_repeated_appends_keep_one_flat_list_of_earlier_runs():
    """Three appends: the environments of the two earlier runs, oldest first, none nested, none twice."""
    first = _res([("vit", 1, 1.0)], env="first")
    second = run._merge_previous(_res([("vit", 32, 1.0)], env="second"), first)
    third = run._merge_previous(_res([("gpt2", 1, 1.0)], env="third"), second)
    assert third["environment"]["earlier_runs"] == [{"gpu": "first"}, {"gpu": "second"}]
    again = run._merge_previous(_res([("gpt2", 1, 1.0)], env="third"), third)
    assert again["environment"]["earlier_runs"] == [{"gpu": "first"}, {"gpu": "second"}, {"gpu": "third"}]


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


def test_merge_covers_precision_dynamic_and_build_rows_and_their_not_run_entries():
    old = _res([], env="old")
    old["precision"] = [{"model": "resnet50", "batch": 32, "precision": p, "ms": 1.0} for p in ("fp16", "int8")]
    old["dynamic"] = [{"model": "resnet50", "dtype": "fp16", "point": p, "ms": 1.0} for p in ("min", "opt", "max")]
    old["build_costs"] = [{"model": "resnet50", "cold_s": 7.0}, {"model": "vit_b_16", "cold_s": 9.0}]
    old["skipped"] = ["precision resnet50 b256 int8: time budget", "dynamic bert_base_seq128 fp16: time budget",
                      "build gpt2_seq128: time budget"]
    new = _res([], env="new")
    new["precision"] = [{"model": "resnet50", "batch": 32, "precision": "int8", "ms": 0.5},
                        {"model": "resnet50", "batch": 256, "precision": "int8", "ms": 3.0}]
    new["dynamic"] = [{"model": "bert_base_seq128", "dtype": "fp16", "point": "opt", "ms": 2.0}]
    new["build_costs"] = [{"model": "resnet50", "cold_s": 5.0}]
    out = run._merge_previous(new, old)
    prec = {(r["batch"], r["precision"]): r["ms"] for r in out["precision"]}
    assert prec == {(32, "fp16"): 1.0, (32, "int8"): 0.5, (256, "int8"): 3.0}
    assert [r["batch"] for r in out["precision"]] == [32, 32, 256]                 # sorted by batch, fp16 first
    assert [(r["model"], r["point"]) for r in out["dynamic"]] == [
        ("resnet50", "min"), ("resnet50", "opt"), ("resnet50", "max"), ("bert_base_seq128", "opt")]
    assert {r["model"]: r["cold_s"] for r in out["build_costs"]} == {"resnet50": 5.0, "vit_b_16": 9.0}
    assert out["skipped"] == ["build gpt2_seq128: time budget"]


def test_an_error_row_does_not_clear_the_not_run_entry_and_replaces_an_old_row():
    old = _res([], env="old")
    old["precision"] = [{"model": "resnet50", "batch": 1, "precision": "fp8", "ms": 1.0}]
    old["skipped"] = ["precision resnet50 b1 int8: time budget"]
    new = _res([], env="new")
    new["precision"] = [{"model": "resnet50", "batch": 1, "precision": "int8", "error": "not run: x"},
                        {"model": "resnet50", "batch": 1, "precision": "fp8", "error": "not run: y"}]
    out = run._merge_previous(new, old)
    assert [r.get("error") for r in out["precision"]] == ["not run: x", "not run: y"]
    assert out["skipped"] == ["precision resnet50 b1 int8: time budget"]
