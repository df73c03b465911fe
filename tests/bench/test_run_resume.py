"""bench/run.py --append --resume: a run of record spread over several commands measures each case once. Oracle:
the first command's stored rows (their medians must come back unchanged) and the log of what was skipped."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
pytest.importorskip("onnxruntime")
run = pytest.importorskip("run")

BASE = ["--device", "cpu", "--models", "tiny_cnn", "--peers", "eager", "--iters", "3", "--warmup", "1",
        "--ort-threads", "1", "--keep-caches", "--part", "fp16", "--no-plots", "--stem", "t"]


def test_resume_keeps_the_rows_of_the_same_label_and_measures_the_rest(tmp_path, capsys):
    assert run.main(BASE + ["--batches", "1", "--label", "rec", "--out-dir", str(tmp_path)]) == 0
    first = json.loads((tmp_path / "t.json").read_text())
    b1 = first["zoo"][0]["runners"]["tensorforge"]["median_ms"]
    capsys.readouterr()
    assert run.main(BASE + ["--batches", "1,2", "--label", "rec", "--out-dir", str(tmp_path), "--append",
                            "--resume"]) == 0
    log = capsys.readouterr().out
    assert "zoo tiny_cnn b1 fp16: measured earlier in this run of record (rec), kept" in log
    assert "build tiny_cnn: measured earlier" in log and "tiny_cnn b2 fp16: tensorforge" in log
    res = json.loads((tmp_path / "t.json").read_text())
    rows = {r["batch"]: r for r in res["zoo"]}
    assert set(rows) == {1, 2} and rows[1]["runners"]["tensorforge"]["median_ms"] == b1
    assert not list(tmp_path.glob("*.png"))                     # --no-plots


def test_a_different_label_measures_everything_again(tmp_path, capsys):
    assert run.main(BASE + ["--batches", "1", "--label", "old", "--out-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    assert run.main(BASE + ["--batches", "1", "--label", "new", "--out-dir", str(tmp_path), "--append",
                            "--resume"]) == 0
    assert "measured earlier" not in capsys.readouterr().out
    res = json.loads((tmp_path / "t.json").read_text())
    assert [r["run"] for r in res["zoo"]] == ["new"]
