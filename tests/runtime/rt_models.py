"""Small ONNX models for the runtime tests (built with onnx.helper; no exporter needed)."""

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def _model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "runtime_test", inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def affine_relu(features: int = 4) -> bytes:
    """y = relu(x · 2 + b) − x, x of shape (batch, features), batch dynamic; nodes named n_mul, n_add, n_relu, n_sub."""
    b = numpy_helper.from_array(np.linspace(-1, 1, features).astype(np.float32), "b")
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    nodes = [helper.make_node("Mul", ["x", "two"], ["t0"], name="n_mul"),
             helper.make_node("Add", ["t0", "b"], ["t1"], name="n_add"),
             helper.make_node("Relu", ["t1"], ["t2"], name="n_relu"),
             helper.make_node("Sub", ["t2", "x"], ["y"], name="n_sub")]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", features])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [b, two])


def reference_affine_relu(x, features: int = 4):
    import torch
    b = torch.linspace(-1, 1, features)
    return torch.relu(x * 2 + b) - x


def reshape_by_shape(features: int = 6) -> bytes:
    """y = Reshape(Relu(x), Shape(x)) · 3: the Shape is host-side shape arithmetic read by a device layer."""
    three = numpy_helper.from_array(np.array(3.0, np.float32), "three")
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="n_relu"),
             helper.make_node("Shape", ["x"], ["s"], name="n_shape"),
             helper.make_node("Reshape", ["r", "s"], ["t"], name="n_reshape"),
             helper.make_node("Mul", ["t", "three"], ["y"], name="n_mul")]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", features])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [three])


def scale_by_width(features: int = 6) -> bytes:
    """y = x · float(Shape(x)[1]): host shape arithmetic read as *data* by a device layer (it must be copied)."""
    one = numpy_helper.from_array(np.array(1, np.int64), "one")
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="n_shape"),
             helper.make_node("Gather", ["s", "one"], ["w"], name="n_gather", axis=0),
             helper.make_node("Cast", ["w"], ["wf"], name="n_cast", to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "wf"], ["y"], name="n_mul")]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", features])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [one])
