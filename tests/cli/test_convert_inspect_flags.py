"""Issue 14.3: `tensorforge convert --minShapes/--optShapes/--maxShapes`, `inspect --staticPlugins/--plugins`, and
`inspect` on a foreign .engine file. Engines checked against onnxruntime; plugin runs in a fresh process."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from oracle import ort_run
from tensorforge.cli.main import main
from tensorforge.engine import from_bytes

ROOT = Path(__file__).resolve().parents[2]


def _dynamic(path: Path) -> Path:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    m = helper.make_model(helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=1)], "d", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def test_convert_takes_shape_flags(tmp_path, capsys):
    model, engine, dump = _dynamic(tmp_path / "d.onnx"), tmp_path / "d.engine", tmp_path / "d.txt"
    assert main(["convert", str(model), "-o", str(engine), "-t", str(dump), "--minShapes=x:1x4",
                 "--optShapes=x:8x4", "--maxShapes=x:32x4", "--device=cpu"]) == 0
    data = from_bytes(engine.read_bytes())
    assert data.profiles[0]["x"] == ((1, 4), (8, 4), (32, 4))
    import tensorforge as tfg
    x = np.random.default_rng(0).standard_normal((20, 4)).astype(np.float32)
    got = tfg.load(engine, device="cpu").run({"x": x})["y"]
    np.testing.assert_allclose(got, ort_run(model.read_bytes(), {"x": x})["y"], rtol=1e-5, atol=1e-6)
    assert "output y: float32[-1,4]" in dump.read_text()           # min and max differ: the batch is dynamic
    assert main(["convert", str(model), "-o", str(tmp_path / "s.engine"), "-t", str(dump), "--optShapes=x:3x4",
                 "--device=cpu"]) == 0
    assert "output y: float32[3,4]" in dump.read_text()            # --optShapes alone fixes the shape
    assert from_bytes((tmp_path / "s.engine").read_bytes()).profiles[0]["x"] == ((3, 4), (3, 4), (3, 4))
    capsys.readouterr()
    assert main(["convert", str(model), "-o", str(tmp_path / "bad.engine"), "--minShapes=x:1x4",
                 "--optShapes=x:3x4"]) == 2
    assert "only --optShapes, or all of" in capsys.readouterr().err
    assert main(["convert", str(model), "-t", "-", "--optShapes=z:3x4"]) == 2
    assert "'z' is not an input" in capsys.readouterr().err


PLUGIN = '''
import tensorforge.plugin as tfp

@tfp.register("custom::Twice", version="1")
def _(x: tfp.TensorDesc) -> tfp.TensorDesc:
    return x.like()

@tfp.reference("custom::Twice", "1")
def _(x):
    return x * 2
'''


def test_inspect_loads_plugins_first(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("Twice", ["x"], ["y"], domain="custom")
    m = helper.make_model(helper.make_graph([node], "p", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("custom", 1)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "p.onnx")
    (tmp_path / "twice.py").write_text(PLUGIN)
    cmd = [sys.executable, "-m", "tensorforge", "inspect", str(tmp_path / "p.onnx")]
    without = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert without.returncode == 1 and "Twice" in without.stdout
    for flag in ("--staticPlugins", "--plugins"):
        with_plugin = subprocess.run(cmd + [f"{flag}={tmp_path / 'twice.py'}"], cwd=ROOT, capture_output=True,
                                     text=True, timeout=300)
        assert with_plugin.returncode == 0, with_plugin.stdout + with_plugin.stderr


@pytest.mark.parametrize("suffix", [".engine", ".plan", ".trt"])
def test_inspect_foreign_engine_says_so(tmp_path, capsys, suffix):
    path = tmp_path / f"model{suffix}"
    path.write_bytes(b"ftrt\x00\x00\x00\x01 a TensorRT plan, not ours" + bytes(64))
    assert main(["inspect", str(path)]) != 0
    err = capsys.readouterr().err
    assert "is not a tensorforge engine" in err and "cannot read ONNX" not in err
