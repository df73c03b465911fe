"""tensorforge.backend as an onnx.backend.base.Backend, beyond the suite: the API surface, per-shape builds,
unsupported-version errors, and the suite's own configuration files."""

import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import onnx.backend.test
from tensorforge.backend import TensorforgeBackend, prepare, run_node, supports_device
from tensorforge.util.errors import UnsupportedOpError

from suite_config import HERE, KNOWN_FAILURES, load_exclusions
from tolerances import TOLERANCES


def _model(nodes, inputs, outputs, opset=17, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def test_devices():
    assert supports_device("CPU")
    assert not supports_device("NOPE")


def test_run_node_matches_numpy():
    node = helper.make_node("Add", ["a", "b"], ["c"])
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.ones(3, dtype=np.float32)
    (c,) = run_node(node, [a, b])
    np.testing.assert_array_equal(c, a + b)


def test_dynamic_input_builds_one_engine_per_shape():
    """A symbolic batch dim: prepare parses, run builds per input shape, results match onnxruntime."""
    m = _model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("ReduceSum", ["r"], ["y"], keepdims=0)],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], opset=11)
    rep = prepare(m)
    for n in (2, 5, 2):
        x = np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)
        np.testing.assert_allclose(rep.run([x])[0], _ort(m, {"x": x})[0], rtol=1e-5, atol=1e-6)
    assert len(rep._engines) == 2


def test_value_input_known_only_at_run_time():
    """Reshape's shape is a graph input: the builder cannot know the output shape, the runtime does."""
    m = _model([helper.make_node("Reshape", ["x", "s"], ["y"])],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
                helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    rep = prepare(m)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    for shape in ([3, 4], [6, 2], [-1, 3]):
        s = np.array(shape, dtype=np.int64)
        np.testing.assert_array_equal(rep.run([x, s])[0], _ort(m, {"x": x, "s": s})[0])
    (engine,) = rep._engines.values()
    assert engine.data.tensors["y"].shape is None       # rank unknown at build time: recorded as such


def test_unverified_version_names_op_version_and_verified(monkeypatch):
    """An opset that resolves Relu to a version with no importer (here 14, un-registered for the test) fails
    in prepare with the op, the version found and the versions verified."""
    from tensorforge.parser import registry
    monkeypatch.delitem(registry._IMPORTERS, ("", "Relu", 14))
    verified = registry.supported_versions("Relu")
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], opset=14)
    with pytest.raises(UnsupportedOpError) as err:
        prepare(m)
    msg = str(err.value)
    assert "Relu" in msg and "version 14" in msg and 14 not in verified
    assert "verified versions: " + ", ".join(map(str, verified)) in msg


def test_exclusions_all_have_reasons(tmp_path):
    entries = load_exclusions()
    assert all(reason for _, reason in entries)
    bad = tmp_path / "x.txt"
    bad.write_text("^test_foo_\n")
    with pytest.raises(ValueError, match="no reason"):
        load_exclusions(bad)


def test_exclusions_and_tolerances_name_real_cases():
    names = set()
    for case in onnx.backend.test.BackendTest(TensorforgeBackend, __name__).test_cases.values():
        names.update(n for n in dir(case) if n.startswith("test_") and n.endswith("_cpu"))
    for pattern, reason in load_exclusions() + load_exclusions(KNOWN_FAILURES):
        assert any(re.search(pattern, n) for n in names), f"entry {pattern!r} ({reason}) matches no case"
    for name, tol in TOLERANCES.items():
        assert f"{name}_cpu" in names, f"tolerance override for unknown case {name}"
        assert set(tol) <= {"rtol", "atol"}
    assert (HERE / "exclusions.txt").exists()
