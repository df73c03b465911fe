"""Bad input to `tensorforge exec`: each case is one line on stderr, a non-zero exit and no traceback.

Covers malformed/truncated ONNX, an unsupported op, a shape outside the profile, wrong input files, missing
files, truncated/tampered/foreign/other-version engines, refused and unknown flags, and a failed --saveEngine
that must leave the previous engine byte-identical. Two cases run as subprocesses to check the real exit
code and that a traceback appears only with --verbose.
"""

import struct
import subprocess
import sys

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

from tensorforge.cli.main import main

FAST = ["--warmUp=0", "--duration=0", "--iterations=2"]


def _save(path, nodes, inputs, outputs, initializers=(), opsets=(("", 17),)):
    model = helper.make_model(helper.make_graph(nodes, "m", inputs, outputs, initializer=list(initializers)),
                              opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    model.ir_version = 8
    onnx.save(model, path)
    return path


@pytest.fixture
def good(tmp_path):
    """y = relu(x) + b with x: float32[N, 4], and a 256-float initializer so truncation cuts inside the data."""
    b = helper.make_tensor("b", TensorProto.FLOAT, [64, 4], np.linspace(-1, 1, 256, dtype=np.float32))
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "b"], ["y"])]
    return _save(tmp_path / "good.onnx", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [b])


@pytest.fixture
def unsupported(tmp_path):
    nodes = [helper.make_node("NoSuchOp", ["x"], ["y"], domain="com.example")]
    return _save(tmp_path / "bad_op.onnx", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                 opsets=(("", 17), ("com.example", 1)))


@pytest.fixture
def engine(tmp_path, good, capsys):
    path = tmp_path / "good.engine"
    assert main(["exec", f"--onnx={good}", "--minShapes=x:1x4", "--optShapes=x:64x4", "--maxShapes=x:64x4",
                 f"--saveEngine={path}", "--skipInference"]) == 0
    capsys.readouterr()
    return path


def fails(capsys, *args, code=None, says=()):
    """Run exec; assert non-zero (or `code`), one stderr line with every word of `says`, no traceback."""
    rc = main(["exec", *map(str, args)])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert rc != 0 if code is None else rc == code, (rc, err)
    assert len(lines) == 1 and lines[0].startswith("tensorforge: error: "), err
    assert "Traceback" not in err and "internal error" not in err, err
    for word in says:
        assert word in lines[0], lines[0]
    assert "&&&& FAILED" in out
    return lines[0]


def test_malformed_onnx(tmp_path, capsys):
    bad = tmp_path / "garbage.onnx"
    bad.write_bytes(b"\xff\xfe this is not a protobuf \x00\x01" * 8)
    fails(capsys, f"--onnx={bad}", *FAST, says=("garbage.onnx",))


def test_truncated_onnx(tmp_path, good, capsys):
    data = good.read_bytes()
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(data[: len(data) // 2])
    fails(capsys, f"--onnx={cut}", *FAST, says=("cut.onnx",))


def test_unsupported_op(unsupported, capsys):
    fails(capsys, f"--onnx={unsupported}", *FAST, says=("NoSuchOp",))


def test_shape_outside_profile(engine, capsys):
    fails(capsys, f"--loadEngine={engine}", "--shapes=x:65x4", *FAST, says=("65x4", "outside"))


def test_shape_with_wrong_rank(engine, capsys):
    fails(capsys, f"--loadEngine={engine}", "--shapes=x:4", *FAST, says=("rank",))


def test_input_file_of_wrong_dtype(tmp_path, engine, capsys):
    np.save(tmp_path / "x.npy", np.zeros((2, 4), np.int64))
    fails(capsys, f"--loadEngine={engine}", f"--loadInputs=x:{tmp_path / 'x.npy'}", *FAST, says=("int64", "float32"))


def test_raw_input_file_of_wrong_size(tmp_path, engine, capsys):
    (tmp_path / "x.bin").write_bytes(np.zeros(7, np.float32).tobytes())
    fails(capsys, f"--loadEngine={engine}", "--shapes=x:2x4", f"--loadInputs=x:{tmp_path / 'x.bin'}", *FAST,
          says=("28 bytes", "expected 32"))


def test_input_file_for_an_input_the_engine_lacks(tmp_path, engine, capsys):
    np.save(tmp_path / "z.npy", np.zeros((2, 4), np.float32))
    fails(capsys, f"--loadEngine={engine}", f"--loadInputs=z:{tmp_path / 'z.npy'}", *FAST, says=("'z'", "inputs are: x"))


def test_missing_input_file(tmp_path, engine, capsys):
    fails(capsys, f"--loadEngine={engine}", f"--loadInputs=x:{tmp_path / 'nope.bin'}", *FAST, says=("nope.bin",))


def test_missing_model_and_engine_files(tmp_path, capsys):
    fails(capsys, f"--onnx={tmp_path / 'absent.onnx'}", *FAST, says=("not found", "absent.onnx"))
    fails(capsys, f"--loadEngine={tmp_path / 'absent.engine'}", *FAST, says=("not found", "absent.engine"))


def test_truncated_engine(tmp_path, engine, capsys):
    cut = tmp_path / "cut.engine"
    cut.write_bytes(engine.read_bytes()[:-10])
    fails(capsys, f"--loadEngine={cut}", *FAST, says=("truncated",))
    cut.write_bytes(engine.read_bytes()[:30])
    fails(capsys, f"--loadEngine={cut}", *FAST, says=("truncated",))


def test_tampered_engine(tmp_path, engine, capsys):
    data = bytearray(engine.read_bytes())
    data[len(data) // 2] ^= 0x40
    bad = tmp_path / "tampered.engine"
    bad.write_bytes(bytes(data))
    fails(capsys, f"--loadEngine={bad}", *FAST, says=("checksum",))


def test_foreign_file_as_engine(good, capsys):
    fails(capsys, f"--loadEngine={good}", *FAST, says=("not a tensorforge engine",))


def test_engine_of_another_format_version(tmp_path, engine, capsys):
    data = bytearray(engine.read_bytes())
    struct.pack_into("<I", data, 8, 99)          # the header's format-version field
    other = tmp_path / "v99.engine"
    other.write_bytes(bytes(data))
    fails(capsys, f"--loadEngine={other}", *FAST, says=("format version 99", "rebuild"))


def test_refused_unknown_and_malformed_flags(good, capsys):
    fails(capsys, f"--onnx={good}", "--int4", code=2, says=("--int4 is not supported yet", "INT4"))
    fails(capsys, f"--onnx={good}", "--calibData=x", code=2, says=("--calibData needs --int8",))   # issue 12's rows
    fails(capsys, f"--onnx={good}", "--frobnicate=3", code=2, says=("unknown option --frobnicate",))
    fails(capsys, "--onnx", str(good), code=2, says=("--onnx needs a value", "--onnx=<file>"))
    fails(capsys, f"--onnx={good}", "--fp16=true", code=2, says=("switch",))


def test_inconsistent_options(tmp_path, good, engine, capsys):
    fails(capsys, *FAST, code=2, says=("no model",))
    fails(capsys, f"--onnx={good}", f"--loadEngine={engine}", code=2, says=("--onnx and --loadEngine",))
    fails(capsys, f"--loadEngine={engine}", "--fp16", code=2, says=("--fp16 is a build option",))
    fails(capsys, f"--onnx={good}", "--minShapes=x:1x4", "--optShapes=x:2x4", code=2, says=("--optShapes",))
    fails(capsys, f"--onnx={good}", "--skipInference", "--dumpOutput", code=2, says=("--dumpOutput",))
    fails(capsys, f"--onnx={good}", "--shapes=q:1x4", *FAST, says=("'q'",))
    fails(capsys, f"--onnx={good}", "--device=tpu", *FAST, code=2, says=("tpu",))
    if not torch.cuda.is_available():
        fails(capsys, f"--onnx={good}", "--device=0", *FAST, code=2, says=("no CUDA GPU",))


def test_failed_save_keeps_the_previous_engine(tmp_path, unsupported, engine, capsys):
    before = engine.read_bytes()
    fails(capsys, f"--onnx={unsupported}", f"--saveEngine={engine}", *FAST, says=("NoSuchOp",))
    assert engine.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []   # no temporary left behind
    fails(capsys, f"--loadEngine={engine}", f"--saveEngine={tmp_path / 'no_dir' / 'x.engine'}", *FAST,
          says=("does not exist",))


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "tensorforge", "exec", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def test_subprocess_exit_codes_and_traceback_only_with_verbose(unsupported):
    quiet = _cli(f"--onnx={unsupported}", *FAST)
    assert quiet.returncode == 1 and "Traceback" not in quiet.stderr
    assert len(quiet.stderr.strip().splitlines()) == 1 and "NoSuchOp" in quiet.stderr
    refused = _cli(f"--onnx={unsupported}", "--int4")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "--int4 is not supported" in refused.stderr
    loud = _cli(f"--onnx={unsupported}", "--verbose", *FAST)
    assert loud.returncode == 1 and "Traceback" in loud.stderr and "NoSuchOp" in loud.stderr.strip().splitlines()[-1]
