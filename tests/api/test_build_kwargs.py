"""tfg.build refuses keywords it does not know for an ONNX model (they were silently absorbed as export options, so
a misspelt `int_8=True` built an fp32 engine)."""

import pytest
from onnx import TensorProto, helper

import tensorforge as tfg
from tensorforge.util.errors import UsageError


def _relu():
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def test_unknown_keyword_for_an_onnx_model_is_refused():
    with pytest.raises(UsageError, match="int_8"):
        tfg.build(_relu(), device="cpu", int_8=True)


def test_known_keywords_still_build():
    import numpy as np
    e = tfg.build(_relu(), device="cpu", fp16=False)
    assert (e.run({"x": np.array([-1, 2], np.float32)})["y"] == np.array([0, 2], np.float32)).all()
