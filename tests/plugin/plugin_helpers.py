"""Helpers for plugin tests: one-node custom-domain ONNX models, and the one-line error check."""

from onnx import TensorProto, helper

FLOAT, INT32, INT64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64


def custom_model(op_type, inputs, outputs, domain="custom", initializers=(), node_inputs=None, **attrs) -> bytes:
    """One node `domain::op_type`; inputs/outputs are (name, elem_type, shape or None)."""
    names = node_inputs if node_inputs is not None else [i[0] for i in inputs]
    node = helper.make_node(op_type, names, [o[0] for o in outputs], domain=domain, **attrs)
    graph = helper.make_graph([node], f"{op_type}_test",
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
                              initializer=list(initializers))
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model.SerializeToString()


def one_line(excinfo) -> str:
    """The error's text, checked to be a single line."""
    text = str(excinfo.value)
    assert "\n" not in text, f"error is not one line: {text!r}"
    return text
