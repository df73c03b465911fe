"""GatherND and ScatterND build their linear offsets from the index tensor alone: no tensor is made from host
data (torch.tensor / torch.as_tensor of Python lists), which on CUDA is a host→device copy that a CUDA-graph
capture refuses (issue 15: a dynamo-exported BERT ran without graphs because of a GatherND layer). Checked here
with those constructors made to raise, and the values against onnx.reference (negative indices, batch_dims)."""

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


@pytest.fixture
def no_host_tensors(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a tensor was made from host data (a host→device copy on CUDA)")
    monkeypatch.setattr(torch, "tensor", refuse)
    monkeypatch.setattr(torch, "as_tensor", refuse)


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
