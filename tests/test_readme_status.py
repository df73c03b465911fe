"""README.md's "Where it stands" block is generated from the results files (tools/gen_readme_status.py); this
fails when the block is stale, and shows that the block follows the files (a changed number changes it)."""

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _gen():
    spec = importlib.util.spec_from_file_location("gen_readme_status", ROOT / "tools" / "gen_readme_status.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_status_block_is_current():
    gen = _gen()
    readme = (ROOT / "README.md").read_text()
    assert gen.replace_block(readme, gen.render()) == readme, \
        "README.md's status block is stale: run `.venv/bin/python tools/gen_readme_status.py`"


def _copy_results(tmp_path: Path) -> Path:
    (tmp_path / "bench").mkdir()
    shutil.copytree(ROOT / "bench" / "results", tmp_path / "bench" / "results",
                    ignore=shutil.ignore_patterns("*.png", "*.md"))
    (tmp_path / "tests" / "onnx_backend").mkdir(parents=True)
    return tmp_path


def test_block_follows_the_files(tmp_path):
    gen = _gen()
    root = _copy_results(tmp_path)
    (root / "tests" / "onnx_backend" / "results.json").write_text(json.dumps(
        {"passed": 1234, "cases": 2033, "failed": 5, "onnx": "1.23.2", "commit": "abc1234"}))
    block = gen.render(root)
    assert "1234 of 2033 cases pass (5 failed)" in block and "commit abc1234" in block
    fp16 = root / "bench" / "results" / "nvidia-h200.json"
    data = json.loads(fp16.read_text())
    row = data["zoo"][0]
    for k in ("strongest_peer", "ratio_vs_strongest"):
        row.pop(k, None)
    row["runners"] = {"tensorforge": {"median_ms": 3.0}, "compile+graph": {"median_ms": 2.0},
                      "freeze+graph": {"median_ms": 1.5}, "device copy": {"median_ms": 0.1}}
    fp16.write_text(json.dumps(data))
    changed = gen.render(root)
    assert changed != block
    assert f"{row['model']} b{row['batch']} 2.00× (freeze+graph)" in changed     # 3.0 / 1.5, copy not a peer


def test_missing_and_odd_fields_do_not_break_it(tmp_path):
    gen = _gen()
    res = tmp_path / "bench" / "results"
    res.mkdir(parents=True)
    (res / "nvidia-h200.json").write_text(json.dumps({"zoo": [{"model": "m", "batch": 1, "error": "boom"},
                                                              {"model": "n", "batch": 2, "runners": {}}, 7]}))
    (res / "nvidia-h200-fp32.json").write_text("not json")
    (res / "cpu-x86_64.json").write_text(json.dumps({"rows": [{"model": "g", "tensorforge": {"median_ms": 1.0},
                                                                "onnxruntime": {"median_ms": 2.0}}]}))
    block = gen.render(tmp_path)
    assert "in 0 of 0 timed cases" in block and "Not measured: n b2; m b1" in block
    assert "g 0.50×" in block and "no results recorded" in block


def test_markers_are_required():
    gen = _gen()
    with pytest.raises(ValueError, match="exactly one status block"):
        gen.replace_block("# no block here\n", gen.render())


def test_backend_line_follows_the_runner_times(tmp_path):
    """The torch.compile-backend line is computed from the row's runners: tf-backend 2 ms, our engine 1 ms,
    compile+graph 4 ms → 2.00×/0.50×, one break named; a row without the runner is left out."""
    gen = _gen()
    root = _copy_results(tmp_path)
    fp16 = root / "bench" / "results" / "nvidia-h200.json"
    data = json.loads(fp16.read_text())
    for r in data["zoo"]:
        r["runners"].pop("tf-backend", None)
    row = data["zoo"][0]
    row["runners"].update({"tensorforge": {"median_ms": 1.0}, "compile+graph": {"median_ms": 4.0},
                           "tf-backend": {"median_ms": 2.0, "graph_breaks": ["x (aten.foo): why"],
                                          "accuracy_vs_ort_fp32": {"pass": False}}})
    fp16.write_text(json.dumps(data))
    block = gen.render(root)
    assert (f"faster than torch.compile default + CUDA graph in 1 of 1; accuracy passes in 0 of 1; graph breaks 1"
            in block)
    assert f"{row['model']} b{row['batch']} 2.00×/0.50× (1 break)." in block


def test_startup_line_reads_the_table(tmp_path):
    gen = _gen()
    root = _copy_results(tmp_path)
    (root / "bench" / "results" / "startup-cpu.md").write_text(
        "x\n\n| what | median s | target (issue 14) |\n| --- | --- | --- |\n| import torch (floor) | 1.30 |  |\n"
        "| tensorforge --help | 1.50 | < 1 s: missed |\n")
    block = gen.render(root)
    assert "(`bench/results/startup-cpu.md`, fresh processes): tensorforge --help 1.50 s (< 1 s: missed)." in block
    (root / "bench" / "results" / "startup-cpu.md").unlink()
    assert "Start-up" not in gen.render(root)


def test_zoo_and_precision_lines_name_the_runs_their_rows_came_from(tmp_path):
    """A results file merged from several runs: the zoo line names each row's run (not the file's last label),
    and INT8/FP8 rows are reported as their own ratio to the fp16 engine with the accuracy verdict."""
    gen = _gen()
    res = tmp_path / "bench" / "results"
    res.mkdir(parents=True)
    zoo = [{"model": "m", "batch": b, "run": run, "runners": {"tensorforge": {"median_ms": 1.0},
                                                             "compile+graph": {"median_ms": 2.0}}}
           for b, run in ((1, "commit aaa"), (32, "commit aaa"), (1, "commit bbb"))]
    prec = [{"model": "m", "batch": 32, "precision": "fp16", "speedup_vs_fp16": 1.0, "run": "commit ccc"},
            {"model": "m", "batch": 32, "precision": "int8", "speedup_vs_fp16": 1.234, "run": "commit ccc",
             "accuracy_vs_ort_fp32": {"cosine": 0.98, "pass": False}}]
    (res / "nvidia-h200.json").write_text(json.dumps({"environment": {"gpu": "G", "label": "commit ccc"},
                                                      "zoo": zoo, "precision": prec}))
    block = gen.render(tmp_path)
    assert "G, commit aaa (2 rows), commit bbb (1 row)" in block and "commit ccc): tensorforge" not in block
    assert "m b32 int8 1.23× FAIL cos 0.9800" in block and "m b32 fp16" not in block


def test_cpu_line_names_the_measured_commit(tmp_path):
    gen = _gen()
    res = tmp_path / "bench" / "results"
    res.mkdir(parents=True)
    (res / "cpu-x86_64.json").write_text(json.dumps({"environment": {"threads": 2, "label": "commit abc1234"},
                                                     "rows": [{"model": "g", "ratio": 0.5}]}))
    assert "(`bench/results/cpu-x86_64.json`, 2 threads, commit abc1234): tensorforge" in gen.render(tmp_path)
