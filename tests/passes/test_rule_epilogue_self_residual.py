"""The epilogue rule on x + x after a product: `MatMul h = x·W; Add(h, h)` (and the Conv form) matched the Add as a
residual whose operand is the product itself, removed the producer of h, and the build failed with KeyError 'h'
(fuzz campaign seed 3, ONNX case 4950). The rule now refuses with a reason and the model matches onnxruntime."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from fusion_helpers import check_fused

F = TensorProto.FLOAT


def _model(core: str):
    rng = np.random.default_rng(0)
    if core == "MatMul":
        w = numpy_helper.from_array(rng.normal(size=(4, 3)).astype(np.float32), "W")
        nodes = [helper.make_node("MatMul", ["x", "W"], ["h"])]
        xs, ys = [2, 4], [2, 3]
    else:
        w = numpy_helper.from_array(rng.normal(size=(3, 4, 3, 3)).astype(np.float32), "W")
        nodes = [helper.make_node("Conv", ["x", "W"], ["h"], pads=[1, 1, 1, 1])]
        xs, ys = [1, 4, 5, 5], [1, 3, 5, 5]
    nodes += [helper.make_node("Add", ["h", "h"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, xs)],
                          [helper.make_tensor_value_info("y", F, ys)], initializer=[w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString(), xs


@pytest.mark.parametrize("core", ["MatMul", "Conv"])
def test_product_plus_itself_builds_and_matches(core):
    model, xs = _model(core)
    feeds = {"x": np.random.default_rng(1).normal(size=xs).astype(np.float32)}
    engine, log = check_fused(model, feeds)
    assert "computed inside the matched layers" in log
