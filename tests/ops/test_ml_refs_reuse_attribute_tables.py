"""The classic-ML references (ai.onnx.ml) make their attribute tables once (ir/ops/attr_tables.py): after a first
call, a call makes no tensor from host data (on CUDA a host→device copy, which a CUDA-graph capture refuses: it kept
any LinearClassifier/SVM/Scaler pipeline uncaptured). Checked with torch.tensor / torch.as_tensor made to raise on the
second call; values against onnx.reference's ai.onnx.ml implementations (an independent oracle)."""

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from tensorforge.ir import get_spec
from tensorforge.ir.ops import attr_tables

RNG = np.random.default_rng(7)
X = RNG.standard_normal((5, 4)).astype(np.float32)
X_NAN = X.copy()
X_NAN[1, 2] = X_NAN[3, 0] = np.nan

CASES = {  # op → (input, attributes, number of outputs)
    "LinearRegressor": (X, dict(coefficients=RNG.standard_normal(8).tolist(), intercepts=[0.5, -1.0], targets=2), 1),
    "LinearClassifier": (X, dict(coefficients=RNG.standard_normal(12).tolist(), intercepts=[0.1, 0.2, -0.3],
                                 classlabels_ints=[4, 7, 9], post_transform="SOFTMAX"), 2),
    "Scaler": (X, dict(offset=[0.1, -0.2, 0.3, 0.0], scale=[2.0, 0.5, 1.5, -1.0]), 1),
    "Imputer": (X_NAN, dict(imputed_value_floats=[9.0, 8.0, 7.0, 6.0], replaced_value_float=float("nan")), 1),
    "SVMRegressor": (X, dict(coefficients=[0.7, -0.4, 1.1], support_vectors=RNG.standard_normal(12).tolist(),
                             n_supports=3, kernel_type="RBF", kernel_params=[0.3, 0.0, 3.0], rho=[0.25]), 1),
    "SVMClassifier": (X, dict(classlabels_ints=[0, 1, 2], coefficients=RNG.standard_normal(8).tolist(),
                              support_vectors=RNG.standard_normal(16).tolist(), vectors_per_class=[1, 2, 1],
                              kernel_type="RBF", kernel_params=[0.2, 0.0, 3.0], rho=[0.1, -0.2, 0.3]), 2),
}
IMPORTER_NAMES = {"replaced_value_float": "replaced_value", "imputed_value_floats": "imputed_values"}  # IR names


def _oracle(op, x, attrs, n_out):
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, ["x"], outs, domain="ai.onnx.ml", **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.ml", 3)])
    return ReferenceEvaluator(model).run(None, {"x": x})


def _ours(op, x, attrs):
    ir = {IMPORTER_NAMES.get(k, k): (None if k == "replaced_value_float" and np.isnan(v) else v)
          for k, v in attrs.items()}
    out = get_spec(op).reference(torch.from_numpy(x), **get_spec(op).resolve_attrs(ir))
    return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]


def _refuse(*a, **k):
    raise AssertionError("a tensor was made from host data (a host→device copy on CUDA)")


@pytest.mark.parametrize("op", list(CASES))
def test_second_call_makes_no_host_tensor_and_matches_onnx_reference(op, monkeypatch):
    x, attrs, n_out = CASES[op]
    want = _oracle(op, x, attrs, n_out)
    _ours(op, x, attrs)                                # first call: the tables are made
    for name in ("tensor", "as_tensor"):
        monkeypatch.setattr(torch, name, _refuse)
    got = _ours(op, x, attrs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w).reshape(g.shape), rtol=1e-5, atol=1e-6)


def test_label_encoder_needs_no_table():
    """LabelEncoder fills with Python scalars (masked_fill): no table, and no host tensor even on the first call."""
    x = np.array([1.0, 2.0, np.nan, 5.0], np.float32)
    attrs = dict(keys=[1.0, 2.0, float("nan")], values=[10, 20, 30], default=-1, out_dtype="int64")
    with pytest.MonkeyPatch.context() as mp:
        for name in ("tensor", "as_tensor"):
            mp.setattr(torch, name, _refuse)
        got = get_spec("LabelEncoder").reference(torch.from_numpy(x), **attrs)
    assert got.dtype == torch.int64 and got.tolist() == [10, 20, 30, -1]


def test_tables_are_shared_and_kept():
    """One tensor per (values, dtype, device), returned again (a captured graph keeps reading its address)."""
    a = attr_tables.attr_table([1.5, 2.5], torch.float64, "cpu")
    assert attr_tables.attr_table((1.5, 2.5), torch.float64, torch.device("cpu")) is a
    assert attr_tables.attr_table([1.5, 2.5], torch.float32, "cpu") is not a
    assert a.tolist() == [1.5, 2.5] and a.dtype == torch.float64


@pytest.mark.parametrize("op", list(CASES))
def test_repeated_calls_add_no_table_entries(op):
    """Every reference passes its layer's own attribute lists: after the first call, further calls add no entry to
    the tables (a per-call copy such as list(classlabels) or rho[:k] added one entry per call, each keeping its copy
    alive: a leak on every engine run)."""
    x, attrs, _ = CASES[op]
    ir = {IMPORTER_NAMES.get(k, k): (None if k == "replaced_value_float" and np.isnan(v) else v)
          for k, v in attrs.items()}
    spec = get_spec(op)
    resolved = spec.resolve_attrs(ir)
    spec.reference(torch.from_numpy(x), **resolved)             # first call: the tables are made
    before = (len(attr_tables._BY_LIST), len(attr_tables._BY_VALUE))
    for _ in range(5):
        spec.reference(torch.from_numpy(x), **resolved)
    assert (len(attr_tables._BY_LIST), len(attr_tables._BY_VALUE)) == before
