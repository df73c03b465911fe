"""--sparsity on the CPU: the 2:4 pattern test, pruning (closed form), the rewrite to SparseGemm and the reasons a
layer stays dense; a forced-sparse engine against onnxruntime on the model pruned by numpy in the test."""

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from oracle import ort_run
from tensorforge.builder import BuilderConfig, build_engine
from tensorforge.builder.sparsity import is_2_4, prune_2_4
from tensorforge.kernels import candidates
from tensorforge.parser import parse_model
from tensorforge.runtime import ExecutionContext


def test_pattern_detection():
    ok = torch.tensor([[1.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 3.0]])
    assert is_2_4(ok) and not is_2_4(torch.tensor([[1.0, 1.0, 1.0, 0.0]]))
    assert not is_2_4(torch.ones(2, 6))                      # K = 6 is not a multiple of 4
    assert is_2_4(ok.t(), axis=0)


def test_pruning_keeps_the_two_largest_of_each_group_of_four():
    w = torch.tensor([[0.1, -0.5, 0.3, 0.2, 4.0, 4.0, -4.0, 1.0]])
    # group 1: |.1| |.5| |.3| |.2| → keep -0.5, 0.3; group 2: ties 4, 4, -4 → the two earlier ones
    assert torch.equal(prune_2_4(w), torch.tensor([[0.0, -0.5, 0.3, 0.0, 4.0, 4.0, 0.0, 0.0]]))
    w2 = torch.randn(6, 8, generator=torch.Generator().manual_seed(0))
    p = prune_2_4(w2, axis=1)
    assert is_2_4(p, axis=1)
    g, q = w2.reshape(6, 2, 4).abs(), p.reshape(6, 2, 4)
    for r in range(6):
        for c in range(2):
            kept = sorted(range(4), key=lambda i: -float(g[r, c, i]))[:2]
            assert all((q[r, c, i] != 0) == (i in kept) for i in range(4))
    with pytest.raises(ValueError, match="multiple of 4"):
        prune_2_4(torch.ones(3, 6))


def _model(w, b):
    nodes = [helper.make_node("Gemm", ["x", "W", "B"], ["h"], name="fc1", transB=1),
             helper.make_node("Relu", ["h"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
                          [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_force_prunes_and_matches_onnxruntime_on_the_pruned_model():
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    pruned = w.copy().reshape(8, 4, 4)
    order = np.argsort(-np.abs(pruned), axis=-1, kind="stable")[..., 2:]
    np.put_along_axis(pruned, order, 0.0, axis=-1)
    want = ort_run(_model(pruned.reshape(8, 16), b), {"x": x})["y"]
    engine = build_engine(parse_model(_model(w, b)), BuilderConfig(device="cpu", sparsity="force"))
    got = ExecutionContext(engine, torch.device("cpu")).run({"x": torch.from_numpy(x)})["y"].numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    info = engine.build_info["sparsity"]
    assert info["pruned"] == ["fc1"] and info["sparse_tactic"] == []
    assert "need CUDA" in info["dense"]["fc1"]                                    # CPU: the reason it stays dense


def test_enable_leaves_dense_weights_dense_with_the_reason():
    rng = np.random.default_rng(1)
    w, b = rng.standard_normal((8, 16)).astype(np.float32), np.zeros(8, np.float32)
    engine = build_engine(parse_model(_model(w, b)), BuilderConfig(device="cpu", sparsity="enable"))
    assert "lacks the 2:4 pattern" in engine.build_info["sparsity"]["dense"]["fc1"]
    assert all(la.op != "SparseGemm" for la in engine.layers)


def test_sparse_tactic_rejects_the_cpu_with_a_reason():
    from tensorforge.ir import Layer
    layer = Layer("g", "SparseGemm", ["x", "w"], ["y"], precision="float16")
    found, reasons = candidates(layer, torch.device("cpu"))
    assert "need a CUDA GPU" in reasons["torch_semi_structured"]
    assert any(t.name == "dense" for t, _ in found)
