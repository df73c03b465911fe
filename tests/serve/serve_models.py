"""Engines for the serving tests: four inputs of four dtypes, batch dimension 1..8, built with tensorforge.build.

    y  = x·k + 1          (FP32 [B,4])      hh = h·h   (FP16 [B,3])
    ii = i·3 + 1          (INT64 [B,2])     bb = ¬b    (BOOL [B,2])
`k` tells two engines apart (the reconfigure test swaps one for the other).
"""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

MAX_BATCH = 8


def multi_dtype_model(k: float = 2.0) -> bytes:
    consts = [numpy_helper.from_array(np.array(k, np.float32), "k"),
              numpy_helper.from_array(np.array(1.0, np.float32), "one_f"),
              numpy_helper.from_array(np.array(3, np.int64), "three"),
              numpy_helper.from_array(np.array(1, np.int64), "one_i")]
    nodes = [helper.make_node("Mul", ["x", "k"], ["xk"]), helper.make_node("Add", ["xk", "one_f"], ["y"]),
             helper.make_node("Mul", ["h", "h"], ["hh"]),
             helper.make_node("Mul", ["i", "three"], ["i3"]), helper.make_node("Add", ["i3", "one_i"], ["ii"]),
             helper.make_node("Not", ["b"], ["bb"])]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, "multi_dtype",
        [vi("x", TensorProto.FLOAT, ["B", 4]), vi("h", TensorProto.FLOAT16, ["B", 3]),
         vi("i", TensorProto.INT64, ["B", 2]), vi("b", TensorProto.BOOL, ["B", 2])],
        [vi("y", TensorProto.FLOAT, ["B", 4]), vi("hh", TensorProto.FLOAT16, ["B", 3]),
         vi("ii", TensorProto.INT64, ["B", 2]), vi("bb", TensorProto.BOOL, ["B", 2])], initializer=consts)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def build_engine(path, k: float = 2.0):
    import tensorforge as tfg
    shapes = {n: ((1, w), (4, w), (MAX_BATCH, w)) for n, w in (("x", 4), ("h", 3), ("i", 2), ("b", 2))}
    engine = tfg.build(multi_dtype_model(k), shapes=shapes, device="cpu")
    engine.save(path)
    return tfg.load(path, device="cpu")


def random_inputs(rows: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"x": rng.standard_normal((rows, 4)).astype(np.float32),
            "h": rng.standard_normal((rows, 3)).astype(np.float16),
            "i": rng.integers(-1000, 1000, (rows, 2)).astype(np.int64),
            "b": rng.integers(0, 2, (rows, 2)).astype(bool)}


def _single_input(nodes, out_shape, consts=()) -> bytes:
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "single", [vi("x", TensorProto.FLOAT, ["B", "N"])],
                              [vi("y", TensorProto.FLOAT, out_shape)], initializer=list(consts))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def build_ragged(path):
    """y = x·x + x, x of shape [B 1..8, N 1..6]: requests of several widths meet in one batch."""
    import tensorforge as tfg
    onnx_bytes = _single_input([helper.make_node("Mul", ["x", "x"], ["xx"]), helper.make_node("Add", ["xx", "x"], ["y"])],
                               ["B", "N"])
    tfg.build(onnx_bytes, shapes={"x": ((1, 1), (4, 3), (MAX_BATCH, 6))}, device="cpu").save(path)
    return tfg.load(path, device="cpu")


def build_batch_sum(path):
    """y = ReduceSum(x, axis 0): an output that does not keep the batch dimension (not batchable)."""
    import tensorforge as tfg
    axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
    onnx_bytes = _single_input([helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)], ["N"], [axes])
    tfg.build(onnx_bytes, shapes={"x": ((1, 1), (4, 3), (MAX_BATCH, 6))}, device="cpu").save(path)
