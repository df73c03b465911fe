"""Issue 14.5: every trtexec command line in docs/migrating-from-tensorrt.md runs through `tensorforge exec` (CPU).

The corpus block is read from the doc (so the doc and the test cannot drift), `trtexec` replaced by `tensorforge
exec`, each line run in order in one folder holding small models written here. A line that sets no timing flag
gets `--duration=0 --warmUp=0 --iterations=2` appended (the CPU machine is small; the flags' parsing and effect
are the same). Checks beyond exit code 0: outputs of the --loadInputs line against onnxruntime, the exported
files exist and parse, the two-profile engine holds two profiles. The refused block must exit 2, each with a
reason naming the design fact (DLA, safety, refit, ...), never "unknown option".
"""

import json
import re
import shlex
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from oracle import ort_run
from tensorforge.cli.main import main
from tensorforge.engine import from_bytes

DOC = Path(__file__).resolve().parents[2] / "docs" / "migrating-from-tensorrt.md"
TIMING = ("--duration", "--warmUp", "--iterations")


def _block(name: str) -> list[str]:
    text = DOC.read_text()
    body = re.search(rf"<!-- {name}: begin -->\s*```sh\n(.*?)```\s*<!-- {name}: end -->", text, re.S).group(1)
    return [line for line in body.splitlines() if line.strip()]


def _cnn(path: Path, batch) -> None:
    """Conv 3→8 (3×3, pad 1) → Relu → GlobalAveragePool → Flatten → Gemm 8→10."""
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, 16, 16])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, None)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, "w"),
             numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b"),
             numpy_helper.from_array(rng.standard_normal((10, 8)).astype(np.float32), "fc"),
             numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "fcb")]
    nodes = [helper.make_node("Conv", ["input", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
             helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["output"], transB=1, name="fc")]
    m = helper.make_model(helper.make_graph(nodes, "cnn", [x], [y], initializer=inits),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    _cnn(d / "model.onnx", 1)
    _cnn(d / "dynamic.onnx", "N")
    (d / "calib").mkdir()
    rng = np.random.default_rng(1)
    for k in range(4):
        np.save(d / "calib" / f"batch{k}.npy", rng.standard_normal((1, 3, 16, 16)).astype(np.float32))
    (d / "input.bin").write_bytes(rng.standard_normal((1, 3, 16, 16)).astype("<f4").tobytes())
    (d / "plugins.py").write_text('"""A plugin file that registers nothing: the flag is what is tested."""\n')
    return d


def _argv(line: str) -> list[str]:
    words = shlex.split(line)
    assert words[0] == "trtexec", line
    args = words[1:]
    if not any(a.startswith(t) for a in args for t in TIMING) and "--skipInference" not in args \
            and "--buildOnly" not in args:
        args += ["--duration=0", "--warmUp=0", "--iterations=2"]
    return args


CORPUS = _block("trtexec-corpus")


def test_corpus_is_large_and_covers_every_family():
    assert len(CORPUS) >= 40
    text = " ".join(CORPUS)
    for flag in ("--onnx", "--loadEngine", "--saveEngine", "--minShapes", "--profile=1", "--useProfile", "--shapes",
                 "--fp16", "--int8", "--calib", "--best", "--stronglyTyped",
                 "--memPoolSize", "--workspace", "--timingCacheFile", "--builderOptimizationLevel",
                 "--noDataTransfers", "--useCudaGraph", "--infStreams", "--loadInputs", "--exportOutput",
                 "--dumpProfile", "--dumpLayerInfo", "--profilingVerbosity", "--exportTimes", "--staticPlugins",
                 "--verbose"):
        assert flag in text, flag


def test_every_corpus_line_runs(workdir, monkeypatch, capsys):
    monkeypatch.chdir(workdir)
    failures = []
    for line in CORPUS:
        rc = main(["exec", *_argv(line)])
        out, err = capsys.readouterr()
        if rc != 0 or "&&&& PASSED" not in out:
            failures.append(f"{line}\n    -> exit {rc}: {err.strip() or out.strip().splitlines()[-1]}")
    assert not failures, "\n".join(failures)
    # the lines' effects, checked independently
    x = np.frombuffer((workdir / "input.bin").read_bytes(), "<f4").reshape(1, 3, 16, 16)
    want = ort_run((workdir / "model.onnx").read_bytes(), {"input": x})["output"]
    rec = json.loads((workdir / "output.json").read_text())[0]
    np.testing.assert_allclose(np.array(rec["values"], np.float32).reshape(want.shape), want, rtol=1e-4, atol=1e-5)
    assert len(from_bytes((workdir / "two.engine").read_bytes()).profiles) == 2
    assert json.loads((workdir / "profile.json").read_text())[0]["count"] >= 1
    assert {r["Name"] for r in json.loads((workdir / "layers.json").read_text())["Layers"]}
    assert len(json.loads((workdir / "times.json").read_text())) >= 2
    assert next(iter(json.loads((workdir / "timing.cache").read_text())["devices"])).startswith("cpu:")


REASONS = {"--useDLACore": "DLA", "--layerDeviceTypes": "DLA", "--safe": "safety", "--refit": "refit",
           "--stripWeights": "weight stripping", "--deploy": "Caffe"}


@pytest.mark.parametrize("line", _block("trtexec-refused"))
def test_refused_lines_say_why(line, workdir, monkeypatch, capsys):
    monkeypatch.chdir(workdir)
    assert main(["exec", *shlex.split(line)[1:]]) == 2
    err = capsys.readouterr().err
    assert "unknown option" not in err and "is not supported yet" in err
    flag = next(f for f in REASONS if f in line)
    assert REASONS[flag] in err, err
