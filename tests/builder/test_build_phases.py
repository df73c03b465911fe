"""build_info["phases"]: the build's steps partition its time (the attribution a cold build's analysis reads)."""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg


def test_phases_add_up_to_the_build():
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    info = tfg.build(model.SerializeToString(), device="cpu").data.build_info
    phases = info["phases"]
    assert {"precision", "passes", "shapes", "codegen", "tactics", "point_tactics", "memory_plan"} <= set(phases)
    # each phase is rounded to 1 ms; the steps not named (setup, the engine record) take well under 50 ms here
    assert -0.001 * len(phases) <= info["build_seconds"] - sum(phases.values()) < 0.05
