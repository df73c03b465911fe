"""Gather at constant positions ⇒ Slice (+ Squeeze) views, and residual Add + LayerNorm ⇒ AddLayerNormalization.

Each rule: fires (op counts after tfg.build), numerics equal onnxruntime and the unfused build, and the negative
cases keep their recorded reasons. The fused Triton kernel is checked under TRITON_INTERPRET=1 against the op's
torch reference, with a transposed (strided) residual operand as ViT hands it over.
"""

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from fusion_helpers import build_logged, check_fused, ops
from tensorforge.ir import get_spec

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=()) -> bytes:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, F, None) for n in outputs],
                              [numpy_helper.from_array(np.asarray(v), n) for n, v in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8            # onnx ≥ 1.19 writes IR 11+ by default; onnxruntime 1.30 on the GPU machine reads ≤ 13
    return model.SerializeToString()


# ---- Gather ⇒ Slice view ------------------------------------------------------------------------------------

@pytest.mark.parametrize("index, axis", [(0, 0), (2, 0), (-1, 0), (1, 1), (-3, 2)])
def test_scalar_gather_becomes_a_view(index, axis):
    data = _model([helper.make_node("Gather", ["x", "i"], ["g"], axis=axis), helper.make_node("Relu", ["g"], ["y"])],
                  [("x", [3, 4, 5])], ["y"], [("i", np.array(index, np.int64))])
    x = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
    engine, _ = check_fused(data, {"x": x}, rtol=0, atol=0)
    assert "Gather" not in ops(engine) and ops(engine).count("Slice") == 1


def test_consecutive_run_becomes_one_slice():
    data = _model([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], [("x", [2, 6])], ["y"],
                  [("i", np.array([2, 3, 4], np.int64))])
    engine, _ = check_fused(data, {"x": np.arange(12, dtype=np.float32).reshape(2, 6)}, rtol=0, atol=0)
    assert ops(engine) == ["Slice"]


@pytest.mark.parametrize("indices, reason", [(np.array([0, 2], np.int64), "not a consecutive ascending run"),
                                             (np.array([[0, 1]], np.int64), "rank 2"),
                                             (np.array(7, np.int64), "outside the axis length")])
def test_gather_that_is_not_a_view_stays(indices, reason):
    data = _model([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], [("x", [2, 6])], ["y"],
                  [("i", indices)])
    if reason == "outside the axis length":           # an invalid model: the Gather stays, to fail as it should
        engine, text = build_logged(data)
        assert "Gather" in ops(engine) and reason in text
        with pytest.raises(Exception, match="(?i)index|out of"):
            engine.run({"x": np.zeros((2, 6), np.float32)})
        return
    engine, text = check_fused(data, {"x": np.arange(12, dtype=np.float32).reshape(2, 6)}, rtol=0, atol=0)
    assert "Gather" in ops(engine) and reason in text


# ---- Add + LayerNorm ⇒ AddLayerNormalization -----------------------------------------------------------------

def _pre_norm_block(broadcast=False, axis=-1):
    """h = x + r; y = LN(h); out = y * 2 + h  (the sum is read twice: the residual stream)."""
    rng = np.random.default_rng(1)
    nodes = [helper.make_node("Add", ["x", "r"], ["h"]),
             helper.make_node("LayerNormalization", ["h", "g", "b"], ["y"], axis=axis, epsilon=1e-5),
             helper.make_node("Mul", ["y", "two"], ["y2"]), helper.make_node("Add", ["y2", "h"], ["out"])]
    r_shape = [1, 8] if broadcast else [2, 3, 8]
    norm = [8] if axis == -1 else [3, 8]
    inits = [("g", rng.standard_normal(norm).astype(np.float32)), ("b", rng.standard_normal(norm).astype(np.float32)),
             ("two", np.array(2.0, np.float32))]
    return _model(nodes, [("x", [2, 3, 8]), ("r", r_shape)], ["out"], inits), r_shape


def test_residual_add_and_layernorm_fuse():
    data, r_shape = _pre_norm_block()
    rng = np.random.default_rng(2)
    feeds = {"x": rng.standard_normal((2, 3, 8)).astype(np.float32), "r": rng.standard_normal(r_shape).astype(np.float32)}
    engine, _ = check_fused(data, feeds)
    assert ops(engine).count("AddLayerNormalization") == 1 and "LayerNormalization" not in ops(engine)


@pytest.mark.parametrize("kw, reason", [({"broadcast": True}, "the Add broadcasts"),
                                        ({"axis": 1}, "not over the last axis only")])
def test_add_layernorm_negative(kw, reason):
    data, r_shape = _pre_norm_block(**kw)
    rng = np.random.default_rng(3)
    feeds = {"x": rng.standard_normal((2, 3, 8)).astype(np.float32), "r": rng.standard_normal(r_shape).astype(np.float32)}
    engine, text = check_fused(data, feeds)
    assert "AddLayerNormalization" not in ops(engine) and reason in text


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("bias", [True, False])
def test_triton_add_layernorm_matches_reference_with_a_transposed_operand(dtype, bias):
    from tensorforge.kernels.triton_add_layernorm import add_layernorm
    torch.manual_seed(0)
    a = torch.randn(2, 5, 24).to(dtype)
    b = torch.randn(5, 2, 24).to(dtype).transpose(0, 1)       # strided, as ViT's attention output arrives
    g, beta = torch.randn(24).to(dtype), (torch.randn(24).to(dtype) if bias else None)
    y, s = add_layernorm(a, b, g, beta, 1e-5, warps=1)
    want_y, want_s = get_spec("AddLayerNormalization").reference(a.float(), b.float(), g.float(),
                                                                 beta.float() if bias else None, epsilon=1e-5)
    assert y.is_contiguous() and s.is_contiguous() and y.dtype == dtype
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(s.float(), want_s, rtol=tol, atol=tol)
    torch.testing.assert_close(y.float(), want_y, rtol=tol, atol=tol * 4)


def test_triton_add_layernorm_refuses_what_it_cannot_do():
    from tensorforge.ir import Layer
    from tensorforge.kernels.triton_add_layernorm import TritonAddLayerNorm, add_layernorm
    layer = Layer("l", "AddLayerNormalization", ["a", "b", "g"], ["y", "s"], {"stash_type": 0})
    assert "CUDA" in TritonAddLayerNorm.supports(layer, torch.device("cpu"))
    assert "stash_type" in TritonAddLayerNorm.supports(layer, torch.device("cuda"))
    with pytest.raises(ValueError, match="differ in shape"):
        add_layernorm(torch.zeros(2, 4), torch.zeros(1, 4), torch.ones(4), None, 1e-5)


def _gemm_residual_block(stream_read_twice: bool):
    """h = x·W + c + r;  y = LN(h);  out = y (+ h when the sum is a residual stream read twice)."""
    rng = np.random.default_rng(4)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"]), helper.make_node("Add", ["p", "c"], ["pc"]),
             helper.make_node("Add", ["pc", "r"], ["h"]),
             helper.make_node("LayerNormalization", ["h", "g", "b"], ["y" if stream_read_twice else "out"], axis=-1)]
    if stream_read_twice:
        nodes.append(helper.make_node("Add", ["y", "h"], ["out"]))
    inits = [("w", rng.standard_normal((8, 8)).astype(np.float32)), ("c", rng.standard_normal(8).astype(np.float32)),
             ("g", rng.standard_normal(8).astype(np.float32)), ("b", rng.standard_normal(8).astype(np.float32))]
    model = _model(nodes, [("x", [2, 3, 8]), ("r", [2, 3, 8])], ["out"], inits)
    feeds = {"x": rng.standard_normal((2, 3, 8)).astype(np.float32), "r": rng.standard_normal((2, 3, 8)).astype(np.float32)}
    return model, feeds


def test_gemm_residual_moves_into_the_fused_layernorm_when_the_sum_is_a_stream():
    model, feeds = _gemm_residual_block(stream_read_twice=True)
    engine, _ = check_fused(model, feeds)
    layers = {layer.op: layer for layer in engine.data.layers}
    assert "LayerNormalization" not in layers and "AddLayerNormalization" in layers
    assert len(layers["MatMulEpilogue"].inputs) == 3            # product + bias; the residual went to the norm


def test_post_norm_gemm_residual_moves_into_the_layernorm_and_the_sum_is_not_kept():
    """BERT's post-norm: only the LayerNorm reads the sum, so the fused layer's second output is absent (the sum is
    never written) and the GEMM keeps product + bias; fused and unfused both match onnxruntime."""
    model, feeds = _gemm_residual_block(stream_read_twice=False)
    engine, _ = check_fused(model, feeds)
    layers = {layer.op: layer for layer in engine.data.layers}
    assert "LayerNormalization" not in layers and len(layers["MatMulEpilogue"].inputs) == 3
    assert layers["AddLayerNormalization"].outputs[1] == ""


@pytest.mark.parametrize("keep_sum", [True, False])
def test_triton_add_layernorm_without_the_sum(keep_sum):
    """keep_sum=False: Y as the reference computes it and no S (None, never allocated or written)."""
    from tensorforge.kernels.triton_add_layernorm import add_layernorm
    torch.manual_seed(1)
    a, b, g = torch.randn(3, 4, 40), torch.randn(3, 4, 40), torch.randn(40)
    y, s = add_layernorm(a, b, g, None, 1e-5, warps=1, keep_sum=keep_sum)
    want_y, want_s = get_spec("AddLayerNormalization").reference(a, b, g, None, epsilon=1e-5)
    torch.testing.assert_close(y, want_y, rtol=1e-5, atol=4e-5)
    if keep_sum:
        torch.testing.assert_close(s, want_s)
    else:
        assert s is None
