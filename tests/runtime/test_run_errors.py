"""A kernel that fails at run time is one ExecutionError naming the layer, its op, tactic and ONNX nodes (issue 13.4).

Models that build and then fail only on some input values: a Reshape to a run-time shape, a ConstantOfShape of a
run-time negative size (onnxruntime, the oracle, fails on the same values and runs the good ones), and a fused
Conv+Relu whose dilation is 0 (an attribute that fails only when executed: both ONNX nodes are named). Through
ExecutionContext.run, execute (the CLI's CPU timing loop), the CUDA-graph path (a fake capture backend on the CPU)
and the CLI, which prints the one line and exits non-zero without a traceback.
"""

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from oracle import ort_run
from rt_fakes import FakeGraphBackend
from tensorforge.cli.main import main
from tensorforge.runtime import ExecutionContext
from tensorforge.util.errors import ExecutionError, TensorforgeError

X = np.arange(6, dtype=np.float32).reshape(2, 3) - 2


def runtime_shape_model() -> bytes:
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="n_relu"),
             helper.make_node("Reshape", ["r", "s"], ["y"], name="n_reshape"),
             helper.make_node("ConstantOfShape", ["d"], ["z"], name="n_cos")]
    graph = helper.make_graph(nodes, "runtime_shapes", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                                                        helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
                                                        helper.make_tensor_value_info("d", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def conv_relu_model() -> bytes:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="n_conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"], name="n_relu")]
    graph = helper.make_graph(nodes, "conv_relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


@pytest.fixture(scope="module")
def shapes_engine():
    return tfg.build(runtime_shape_model(), device="cpu")


def feed(s, d):
    return {"x": X, "s": np.array(s, np.int64), "d": np.array(d, np.int64)}


def test_good_values_run_like_onnxruntime(shapes_engine):
    got, want = shapes_engine.run(feed([3, 2], [4])), ort_run(runtime_shape_model(), feed([3, 2], [4]))
    for name in ("y", "z"):
        np.testing.assert_array_equal(got[name], want[name])


@pytest.mark.parametrize("s,d,layer,op,cause", [([7, 1], [4], "n_reshape", "Reshape", "invalid for input of size 6"),
                                                ([3, 2], [-4], "n_cos", "ConstantOfShape", "non-negative")])
def test_bad_values_name_the_layer_and_its_nodes(shapes_engine, s, d, layer, op, cause):
    with pytest.raises(Exception):                              # the oracle refuses these values too
        ort_run(runtime_shape_model(), feed(s, d))
    with pytest.raises(ExecutionError) as info:
        shapes_engine.run(feed(s, d))
    msg = str(info.value)
    assert "\n" not in msg and f"layer {layer!r} ({op}, tactic " in msg and f"; ONNX node(s): {layer})" in msg
    assert "failed at run time: RuntimeError" in msg and cause in msg
    assert isinstance(info.value.__cause__, RuntimeError)      # the kernel's own error kept for --verbose
    np.testing.assert_array_equal(shapes_engine.run(feed([6, 1], [2]))["y"], np.maximum(X, 0).reshape(6, 1))


def _broken_conv():
    engine = tfg.build(conv_relu_model(), device="cpu")
    layer = engine.data.layers[0]
    assert layer.op == "FusedConv" and layer.origin == ["n_conv", "n_relu"]
    layer.attrs["dilations"] = [0, 0]                          # valid to store, fails when the kernel runs
    return engine.data


@pytest.mark.parametrize("path", ["run", "execute", "graph"])
def test_an_attribute_that_fails_when_executed(path):
    data = _broken_conv()
    x = torch.randn(1, 3, 8, 8)
    if path == "graph":
        ctx = ExecutionContext(data, "cpu", graph_backend=FakeGraphBackend())
    else:
        ctx = ExecutionContext(data, "cpu")
    with pytest.raises(ExecutionError, match=r"layer 'n_relu/fused_conv' \(FusedConv, tactic fusedconv\.\w+; "
                                             r"ONNX node\(s\): n_conv, n_relu\) failed at run time: "
                                             r"(RuntimeError: (dilation should be greater than zero|non-positive "
                                             r"dilation)|OneDnnError: oneDNN convolution \[1, 3, 8, 8\] \* "
                                             r"\[4, 3, 3, 3\]: invalid arguments)"):
        ctx.execute({"x": x}) if path == "execute" else ctx.run({"x": x})


def test_project_errors_pass_through_unchanged():
    data = _broken_conv()
    ctx = ExecutionContext(data, "cpu")

    def refuse(inputs):
        raise TensorforgeError("a plugin's own message", "its own hint")
    ctx._program[0] = (0, refuse, *ctx._program[0][2:])
    with pytest.raises(TensorforgeError) as info:
        ctx.run({"x": torch.randn(1, 3, 8, 8)})
    assert type(info.value) is TensorforgeError and str(info.value) == "a plugin's own message (its own hint)"


def test_the_cli_prints_one_line(tmp_path, shapes_engine, capsys):
    path = tmp_path / "shapes.engine"
    shapes_engine.save(path)
    for name, values in (("x", X), ("s", np.array([7, 1], np.int64)), ("d", np.array([4], np.int64))):
        np.save(tmp_path / f"{name}.npy", values)
    inputs = ",".join(f"{n}:{tmp_path / n}.npy" for n in "xsd")
    code = main(["exec", f"--loadEngine={path}", f"--loadInputs={inputs}", "--iterations=1", "--warmUp=0",
                 "--duration=0"])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("tensorforge: error:")]
    assert code == 1 and len(lines) == 1, err
    assert "layer 'n_reshape' (Reshape" in lines[0] and "ONNX node(s): n_reshape" in lines[0]
    assert "Traceback" not in err
