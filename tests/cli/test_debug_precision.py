"""`tensorforge debug precision` on a model built so plain INT8 misses: conv1 reads an input with rare ±200
outliers (its int8 range is either clipped or too coarse), Tanh bounds everything after it. The tool must find a
spec that meets cosine ≥ 0.999 against onnxruntime, and the printed spec passed to `exec` must reproduce it."""

import json
import re

import numpy as np
import pytest

from oracle import ort_run
from precision_models import cosine, images, outlier_cnn
from tensorforge.cli.main import main

FAST = ["--warmUp=0", "--duration=0", "--iterations=1", "--device=cpu"]


@pytest.fixture
def setup(tmp_path):
    model = tmp_path / "outlier.onnx"
    model.write_bytes(outlier_cnn())
    calib = tmp_path / "calib"
    calib.mkdir()
    for i, x in enumerate(images(16, seed=1, outliers=True)):
        np.savez(calib / f"b{i:02d}.npz", x=x)
    x = images(1, seed=50, outliers=True)[0]
    np.savez(tmp_path / "inputs.npz", x=x)
    np.save(tmp_path / "x.npy", x)
    return tmp_path, model, calib, x


def _exec_cosine(tmp, model, calib, x, extra, capsys):
    out = tmp / "out.json"
    code = main(["exec", f"--onnx={model}", "--int8", f"--calibData={calib}", f"--loadInputs=x:{tmp / 'x.npy'}",
                 f"--exportOutput={out}", *extra, *FAST])
    capsys.readouterr()
    assert code == 0
    got = np.array(json.loads(out.read_text())[0]["values"], np.float32)
    return cosine(got, ort_run(outlier_cnn(), {"x": x})["y"])


def test_finds_a_spec_that_exec_reproduces(setup, capsys):
    tmp, model, calib, x = setup
    assert _exec_cosine(tmp, model, calib, x, [], capsys) < 0.999             # plain INT8 misses
    code = main(["debug", "precision", str(model), "--int8", f"--calibData={calib}", "--cosine=0.999",
                 f"--inputs={tmp / 'inputs.npz'}", "--device=cpu"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    spec = re.search(r"^--layerPrecisions=(\S+)$", printed, re.M).group(1)
    assert spec == "conv1:fp32"
    assert "from ONNX nodes conv1" in printed and "latency: plain --int8" in printed
    assert "reproduce: tensorforge exec" in printed
    assert _exec_cosine(tmp, model, calib, x, [f"--layerPrecisions={spec}", "--precisionConstraints=obey"],
                        capsys) >= 0.999


def test_tolerance_out_of_reach_and_usage_errors(setup, capsys):
    tmp, model, calib, _ = setup
    code = main(["debug", "precision", str(model), "--int8", f"--calibData={calib}", "--atol=0", "--rtol=0",
                 f"--inputs={tmp / 'inputs.npz'}", "--device=cpu"])
    assert code == 1 and "no spec found" in capsys.readouterr().out
    for args, what in (([str(model), "--cosine=0.9"], "--int8, --fp8 or --fp16"),
                       ([str(model), "--int8"], "no tolerance"), ([], "no model")):
        code = main(["debug", "precision", *args])
        err = capsys.readouterr().err
        assert code == 2 and what in err and err.count("\n") == 1, err


def test_a_dynamic_batch_model_is_judged_on_a_batch_of_inputs(tmp_path, capsys):
    """The probes are built for the shapes of --inputs (here 4 images on a model with a dynamic batch axis), not
    for the smallest shape the model allows: a batch-1 engine refused the 4-image feed."""
    import onnx
    from precision_models import _cnn
    model = tmp_path / "dyn.onnx"
    data = _cnn("Tanh", 0, "N")
    assert onnx.load_from_string(data).graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"
    model.write_bytes(data)
    calib = tmp_path / "calib"
    calib.mkdir()
    for i, x in enumerate(images(16, seed=1, outliers=True)):
        np.savez(calib / f"b{i:02d}.npz", x=x)
    x = np.concatenate(images(4, seed=50, outliers=True))
    np.savez(tmp_path / "inputs.npz", x=x)
    code = main(["debug", "precision", str(model), "--int8", f"--calibData={calib}", "--cosine=0.999",
                 f"--inputs={tmp_path / 'inputs.npz'}", "--device=cpu"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    spec = re.search(r"^--layerPrecisions=(\S+)$", printed, re.M).group(1).split(",")
    assert spec[0] == "conv1:fp32"                               # the outlier-fed layer, first in topological order
    assert float(re.search(r"^found: .*cosine ([0-9.]+)", printed, re.M).group(1)) >= 0.999


def _spec(model, calib, tmp, capsys, *extra):
    code = main(["debug", "precision", str(model), "--int8", f"--calibData={calib}", "--cosine=0.999",
                 f"--inputs={tmp / 'inputs.npz'}", "--device=cpu", "--runs=1", *extra])
    printed = capsys.readouterr().out
    assert code == 0, printed
    return re.search(r"^--layerPrecisions=(\S+)$", printed, re.M).group(1).split(",")


def test_reverse_direction_searches_suffixes(setup, capsys):
    """conv1 (the outlier-fed layer) is first in topological order: the shortest passing prefix is [conv1], the
    shortest passing suffix is every candidate (the search order fc, conv2, conv1), which the refinement then
    shrinks to conv1 again. The spec is printed in topological order either way."""
    tmp, model, calib, _ = setup
    assert _spec(model, calib, tmp, capsys, "--max-refine=0") == ["conv1:fp32"]
    assert _spec(model, calib, tmp, capsys, "--max-refine=0", "--direction=reverse") == \
        ["conv1:fp32", "conv2:fp32", "fc:fp32"]
    assert _spec(model, calib, tmp, capsys, "--direction=reverse") == ["conv1:fp32"]
