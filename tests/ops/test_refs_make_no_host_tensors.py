"""Op references that kernels call on every run make no tensor from host data (torch.tensor / torch.as_tensor of
Python values), which on CUDA is a host→device copy that a CUDA-graph capture refuses (issue 15: a dynamo-exported
BERT ran without graphs because of a GatherND layer). Checked with those constructors made to raise, values against
independent oracles: onnx.reference (GatherND, ScatterND), closed forms (QGemm multiplier, FlexAttention)."""

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from tensorforge.ir import get_spec


def _onnx(op, arrays, **attrs):
    names = [f"i{k}" for k in range(len(arrays))]
    node = helper.make_node(op, names, ["y"], **attrs)
    types = {np.float32: TensorProto.FLOAT, np.int64: TensorProto.INT64}
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, types[a.dtype.type], a.shape)
                                            for n, a in zip(names, arrays)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    return ReferenceEvaluator(model).run(None, dict(zip(names, arrays)))[0]


def _refuse(*a, **k):
    raise AssertionError("a tensor was made from host data (a host→device copy on CUDA)")


def _refuse_host_tensors(mp):
    for name in ("tensor", "as_tensor"):
        mp.setattr(torch, name, _refuse)


@pytest.fixture
def no_host_tensors(monkeypatch):
    _refuse_host_tensors(monkeypatch)


CASES = [  # data shape, indices, batch_dims
    ((4, 5, 3), np.array([[0, 2], [3, -1], [-4, 4]]), 0),
    ((2, 3, 4), np.array([[[2, 3]], [[-3, 1]]]), 1),
    ((3, 4), np.array([[1, -1], [2, 0]]), 0),
]


@pytest.mark.parametrize("shape,idx,bd", CASES)
def test_gather_nd(no_host_tensors, shape, idx, bd):
    data = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) * 0.5 - 3
    got = get_spec("GatherND").reference(torch.from_numpy(data), torch.from_numpy(idx), batch_dims=bd)
    np.testing.assert_array_equal(got.numpy(), _onnx("GatherND", [data, idx], batch_dims=bd))


@pytest.mark.parametrize("reduction", ["none", "add", "max"])
def test_scatter_nd(no_host_tensors, reduction):
    data = np.random.default_rng(0).standard_normal((4, 5, 3)).astype(np.float32)
    idx = np.array([[0, 2], [3, -1], [-3, 4]])
    upd = np.random.default_rng(1).standard_normal((3, 3)).astype(np.float32)
    got = get_spec("ScatterND").reference(torch.from_numpy(data), torch.from_numpy(idx), torch.from_numpy(upd),
                                          reduction=reduction)
    np.testing.assert_allclose(got.numpy(), _onnx("ScatterND", [data, idx, upd], reduction=reduction), rtol=1e-6)


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("alpha", [1.0, 0.3, 1 / 3])
def test_qgemm_multiplier_closed_form(per_channel, alpha):
    """com.microsoft QGemm's requantize multiplier, alpha · a_scale · b_scale[n] / y_scale left to right in
    float32 (numpy's float32 arithmetic as the closed form), made with no tensor from host data: its CUDA kernel
    computes it on every call. (The fixture is applied after the operands exist: they come from host data.)"""
    from tensorforge.ir.ops.contrib_quant import qgemm_multiplier
    a_s = np.float32(0.0123)
    b_s = (np.arange(1, 6, dtype=np.float32) * np.float32(0.0071)) if per_channel else np.float32(0.0071)
    y_s = np.float32(0.37)
    want = np.float32(alpha) * a_s * b_s / y_s
    args = [torch.from_numpy(np.asarray(v)) for v in (a_s, b_s, y_s)]
    with pytest.MonkeyPatch.context() as mp:
        _refuse_host_tensors(mp)
        got = qgemm_multiplier(*args, alpha)
    assert got.dtype == torch.float32
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("scale", [None, 0.2])
def test_flex_attention_without_modifiers_closed_form(no_host_tensors, scale):
    """ai.onnx.preview FlexAttention with no score/prob modifiers is softmax(s·Q·Kᵀ)·V (s = 1/√d by default; grouped
    K/V heads repeated): numpy float64 as the closed form, float32 inputs; √s is rounded to Q's dtype on the host."""
    g = np.random.default_rng(3)
    q = g.standard_normal((2, 4, 5, 8)).astype(np.float32)
    k, v = (g.standard_normal((2, 2, 6, 8)).astype(np.float32) for _ in range(2))
    got = get_spec("FlexAttention").reference(*(torch.from_numpy(t) for t in (q, k, v)), scale=scale)
    s = scale if scale is not None else 1 / np.sqrt(8)
    kk, vv = np.repeat(k, 2, axis=1).astype(np.float64), np.repeat(v, 2, axis=1).astype(np.float64)
    logits = q.astype(np.float64) @ kk.swapaxes(-1, -2) * s
    p = np.exp(logits - logits.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ vv
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
