"""`tensorforge convert` (onnx2trt's flags): the text dump of the seed model, engines, -l/-p/-O, and refusals.

The dump must be readable (one line per ONNX node with shapes and dtypes) and byte-identical across runs,
including a run in a fresh process. Engines written with -o must load and match onnxruntime.
"""

import subprocess
import sys

import numpy as np
import onnx
import pytest
import torch
import torch.nn as nn
from onnx import TensorProto, helper

import tensorforge as tfg
from oracle import export, ort_run
from tensorforge.cli.main import main


from seed_models import MyNet as Seed


@pytest.fixture(scope="module")
def seed_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("convert") / "seed.onnx"
    path.write_bytes(export(Seed(), (torch.randn(3, 257),), opset=11))
    return path


def _one_line_error(capsys, code, rc, fragment):
    err = capsys.readouterr().err.strip()
    assert rc == code and len(err.splitlines()) == 1 and err.startswith("tensorforge: error: ") and fragment in err, err


def test_text_dump_is_one_line_per_node_with_shapes_and_dtypes(seed_model, tmp_path):
    assert main(["convert", str(seed_model), "-t", str(tmp_path / "a.txt")]) == 0
    text = (tmp_path / "a.txt").read_text()
    model = onnx.load(seed_model)
    nodes = [n for n in model.graph.node if n.op_type != "Constant"]
    layer_lines = [line for line in text.splitlines() if line.startswith("%")]
    assert [line.split(" = ")[1].split("(")[0] for line in layer_lines] == [n.op_type for n in nodes]
    assert all(line.endswith("-> float32[3,257]") for line in layer_lines)
    inp = model.graph.input[0].name
    assert f"input  {inp}: float32[3,257]" in text and "output " in text
    assert "= [" not in text                               # no weights without -T
    assert main(["convert", str(seed_model), "-t", str(tmp_path / "b.txt")]) == 0
    assert (tmp_path / "a.txt").read_bytes() == (tmp_path / "b.txt").read_bytes()
    fresh = subprocess.run([sys.executable, "-m", "tensorforge", "convert", str(seed_model), "-t", "-"],
                           capture_output=True, timeout=120)
    assert fresh.returncode == 0 and fresh.stdout == (tmp_path / "a.txt").read_bytes()


def test_text_dump_with_weights_and_dynamic_dims(tmp_path, capsys):
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 2], np.arange(8, dtype=np.float32))
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["y"], name="act")]
    graph = helper.make_graph(nodes, "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2])], initializer=[w])
    path = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    assert main(["convert", str(path), "-T", "-"]) == 0
    text = capsys.readouterr().out
    assert "input  x: float32[batch,4]" in text
    assert "const  w: float32[4,2] = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]" in text
    assert "%h = MatMul(x, w) -> float32[-1,2]" in text and "%y = Relu(h) -> float32[-1,2]" in text


def test_engine_from_o_matches_onnxruntime_and_l_lists_layers(seed_model, tmp_path, capsys):
    out = tmp_path / "seed.engine"
    assert main(["convert", str(seed_model), "-o", str(out), "-l"]) == 0
    listing = capsys.readouterr().out
    engine = tfg.load(out, device="cpu")
    for layer in engine.data.layers:
        assert f"{layer.name}: {layer.op} [{layer.precision}] {layer.tactic}" in listing
        assert f"(from {', '.join(layer.origin)})" in listing
    x = np.random.default_rng(0).standard_normal((3, 257)).astype(np.float32)
    name = engine.input_names[0]
    want = ort_run(seed_model.read_bytes(), {name: x})
    got = engine.run({name: x})
    np.testing.assert_allclose(got[engine.output_names[0]], list(want.values())[0], rtol=1e-5, atol=1e-6)
    assert main(["convert", str(seed_model), "-o", str(tmp_path / "half.engine"), "-d", "16", "-w", "1048576"]) == 0
    half = tfg.load(tmp_path / "half.engine", device="cpu")
    assert half.data.build_info["flags"] == ["fp16"]
    np.testing.assert_allclose(half.run({name: x})[half.output_names[0]], list(want.values())[0], rtol=1e-2, atol=1e-3)


def test_passes_list_and_selection(seed_model, capsys):
    assert main(["convert", "-p"]) == 0
    listed = capsys.readouterr().out
    assert "constant-fold" in listed and "dead-code" in listed
    assert main(["convert", str(seed_model), "-O", "constant-fold;dead-code", "-t", "-", "-v"]) == 0
    captured = capsys.readouterr()
    assert "pass constant-fold:" in captured.err and "%" in captured.out
    _one_line_error(capsys, 2, main(["convert", str(seed_model), "-O", "nosuch"]), "unknown pass 'nosuch'")


@pytest.mark.parametrize("argv,code,fragment", [
    (["-b", "8"], 2, "-b is not supported: implicit-batch"),
    (["-m", "out.onnx"], 2, "-m is not supported"),
    (["-d", "8"], 2, "invalid choice: 8"),
    (["--bogus"], 2, "unrecognized arguments: --bogus"),
])
def test_bad_arguments_are_one_line(seed_model, capsys, argv, code, fragment):
    _one_line_error(capsys, code, main(["convert", str(seed_model)] + argv), fragment)


def test_missing_model_help_and_version(capsys, tmp_path):
    _one_line_error(capsys, 1, main(["convert", str(tmp_path / "none.onnx"), "-t", "-"]), "not found")
    _one_line_error(capsys, 2, main(["convert"]), "no ONNX model given")
    assert main(["convert", "-h"]) == 0
    help_text = capsys.readouterr().out
    for flag in ("-o ENGINE", "-t TXT", "-T TXT", "-d {16,32}", "-w BYTES", "-O PASSES", "-p", "-l", "-v", "-q", "-V"):
        assert flag in help_text, flag
    assert main(["convert", "-V"]) == 0 and tfg.__version__ in capsys.readouterr().out
