"""Input handling, parser bounds and CLI files (issues 13.4, 13.5, 13.6): each case is a finding of the issue.

Oracles: the ONNX spec (dilations, strides ≥ 1; opsets this onnx knows), onnxruntime for the external-data model
that must still build, and the process's own behaviour (nothing allocated, nothing run, exit codes).
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from engine_craft import CNN_SHAPES, cnn_model, small_cnn_engine
from tensorforge.cli import io_files
from tensorforge.cli.main import main
from tensorforge.util.errors import ModelError

ROOT = Path(__file__).resolve().parents[2]
QUICK = ["--device=cpu", "--iterations=1", "--duration=0", "--warmUp=0"]


def _err(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert "internal error" not in err and "Traceback" not in err, err
    return err


# ---- 13.4: attributes and bounds at import ------------------------------------------------------------
def _conv(**attrs) -> bytes:
    w = numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="the_conv", **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


@pytest.mark.parametrize("attrs", [{"dilations": [0, 0]}, {"dilations": [-1, 1]}, {"strides": [2**62, 1]},
                                   {"strides": [0, 1]}, {"pads": [-1, 0, 0, 0]}, {"group": 0}])
def test_conv_attributes_out_of_range_fail_at_import_naming_the_node(attrs):
    with pytest.raises(ModelError) as e:
        tfg.build(_conv(**attrs), device="cpu")
    assert "the_conv" in str(e.value) and list(attrs)[0] in str(e.value) and "\n" not in str(e.value)


def test_opset_of_2_62_is_a_model_error_not_a_get_schema_crash():
    m = onnx.load_from_string(_conv())
    m.opset_import[0].version = 2**62
    with pytest.raises(ModelError, match="opset"):
        tfg.build(m.SerializeToString(), device="cpu")


def test_input_dims_of_2_62_are_a_model_error():
    m = onnx.load_from_string(_conv())
    m.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 2**62
    with pytest.raises(ModelError, match="shape"):
        tfg.build(m.SerializeToString(), device="cpu")


def test_a_valid_conv_still_builds_and_matches_onnxruntime():
    model = _conv(strides=[2, 2], dilations=[1, 1])
    x = np.random.default_rng(0).standard_normal((1, 1, 8, 8)).astype(np.float32)
    want = ort.InferenceSession(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(tfg.build(model, device="cpu").run({"x": x})["y"], want, rtol=1e-5, atol=1e-5)


# ---- 13.6: external data of a model given as bytes ------------------------------------------------------
def _external_model(folder: Path, location: str = "weights.bin") -> bytes:
    b = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = numpy_helper.from_array(b, "b")
    g = helper.make_graph([helper.make_node("Add", ["x", "b"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [t])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    (folder / "weights.bin").write_bytes(b.tobytes())
    init = m.graph.initializer[0]
    init.ClearField("raw_data")
    init.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", str(b.nbytes))):
        e = init.external_data.add()
        e.key, e.value = k, v
    return m.SerializeToString()


def test_bytes_with_external_data_need_external_data_dir(tmp_path, monkeypatch):
    data = _external_model(tmp_path)
    monkeypatch.chdir(tmp_path)            # the file sits in the current folder: it must still not be read
    with pytest.raises(ModelError, match="external_data_dir"):
        tfg.build(data, device="cpu")
    x = np.ones((2, 3), np.float32)
    got = tfg.build(data, device="cpu", external_data_dir=str(tmp_path)).run({"x": x})["y"]
    np.testing.assert_array_equal(got, x + np.arange(6, dtype=np.float32).reshape(2, 3))


@pytest.mark.parametrize("location", ["../secret.bin", "/etc/passwd", "sub/../../secret.bin"])
def test_external_data_may_not_leave_the_model_folder(tmp_path, location):
    inner = tmp_path / "model"
    inner.mkdir()
    (tmp_path / "secret.bin").write_bytes(b"\0" * 24)
    data = _external_model(inner, location)
    (inner / "m.onnx").write_bytes(data)
    with pytest.raises(ModelError, match="folder"):
        tfg.build(str(inner / "m.onnx"), device="cpu")


# ---- 13.6: command-line inputs ---------------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--duration=nan", "--warmUp=nan", "--idleTime=nan", "--duration=inf"])
def test_nan_timing_flags_are_refused(tmp_path, capsys, flag):
    (tmp_path / "m.onnx").write_bytes(cnn_model())
    rc = main(["exec", f"--onnx={tmp_path / 'm.onnx'}", "--device=cpu", flag])
    assert rc == 2 and flag.split("=")[0] in _err(capsys)


def test_huge_shapes_are_refused_before_anything_is_allocated(tmp_path, capsys, monkeypatch):
    (tmp_path / "m.onnx").write_bytes(cnn_model())
    monkeypatch.setattr(io_files, "random_input", lambda *a: pytest.fail("an input was allocated"))
    rc = main(["exec", f"--onnx={tmp_path / 'm.onnx'}", "--shapes=x:99999999x99999999", *QUICK])
    assert rc == 2 and "elements" in _err(capsys)


def test_shapes_outside_the_engine_profile_fail_before_allocating(tmp_path, capsys, monkeypatch):
    (tmp_path / "m.engine").write_bytes(small_cnn_engine())
    monkeypatch.setattr(io_files, "random_input", lambda *a: pytest.fail("an input was allocated"))
    rc = main(["exec", f"--loadEngine={tmp_path / 'm.engine'}", "--shapes=x:999999x3x8x8", *QUICK])
    assert rc != 0 and "profile" in _err(capsys)
    rc = main(["exec", f"--loadEngine={tmp_path / 'm.engine'}", "--shapes=x:2x3x9x8", *QUICK])
    assert rc != 0 and "static" in _err(capsys)


def test_shapes_inside_the_profile_run(tmp_path, capsys):
    (tmp_path / "m.engine").write_bytes(small_cnn_engine())
    assert main(["exec", f"--loadEngine={tmp_path / 'm.engine'}", "--shapes=x:3x3x8x8", *QUICK]) == 0


# ---- 13.5: exports into unwritable folders, broken pipes -------------------------------------------------
@pytest.mark.parametrize("flag", ["--exportProfile", "--exportLayerInfo"])
def test_export_into_an_unwritable_folder_fails_before_the_benchmark(tmp_path, capsys, monkeypatch, flag):
    import tensorforge.cli.exec_cmd as exec_cmd
    (tmp_path / "m.engine").write_bytes(small_cnn_engine())
    monkeypatch.setattr(exec_cmd, "benchmark", lambda *a, **k: pytest.fail("the benchmark ran"))
    unwritable = "/sys/tfg_export.json" if os.path.isdir("/sys") else "/nonexistent/x.json"
    rc = main(["exec", f"--loadEngine={tmp_path / 'm.engine'}", f"{flag}={unwritable}", *QUICK])
    assert rc != 0 and "cannot write" in _err(capsys)


def test_inspect_into_a_closed_pipe_is_quiet(tmp_path):
    path = tmp_path / "m.engine"
    path.write_bytes(small_cnn_engine())
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "tensorforge", "inspect", str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=ROOT)
    proc.stdout.close()                         # `| head` that has already left
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert "BrokenPipe" not in err and "error" not in err, err


def test_trt_parser_reads_external_data_beside_the_given_path(tmp_path):
    """TensorRT's OnnxParser.parse(model, path): `path` names the model file whose folder holds its weights."""
    from tensorforge.api import trt
    data = _external_model(tmp_path)
    net = trt.Builder(trt.Logger()).create_network(0)
    parser = trt.OnnxParser(net, trt.Logger())
    assert not parser.parse(data)                                  # no folder: refused, as a parser error
    assert "external_data_dir" in str(parser.get_error(0)) or parser.num_errors > 0
    net = trt.Builder(trt.Logger()).create_network(0)
    parser = trt.OnnxParser(net, trt.Logger())
    assert parser.parse(data, str(tmp_path / "model.onnx"))
