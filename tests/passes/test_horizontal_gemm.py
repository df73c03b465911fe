"""Horizontal GEMM fusion: sibling products of one input ⇒ one MatMulEpilogue + Split.

Positive: transformers' BertModel (2 layers) — the Q/K/V projections of each layer become one product, numerics
equal onnxruntime at two shapes of a dynamic profile and after save/load, and the attention reads q, k, v as
views of the one product (no copies). Gemm siblings with an absent C. Negative cases keep their reasons:
different activations, a residual, a sibling's output as residual, run-time weights, mixed dtypes.
"""

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from fusion_helpers import assert_close, build_logged, check_fused, export_quiet, ops, ort_run
from tensorforge.ir import Network
from tensorforge.passes import pipeline
from tensorforge.passes.rules.horizontal_gemm import RULE, fuse_horizontal_gemms

NAMES = ["input_ids", "attention_mask"]
PROFILE = ((1, 2), (2, 5), (3, 8))


def _bert() -> bytes:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=64, attn_implementation="sdpa")
    bert = transformers.BertModel(cfg).eval()

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask, return_dict=False)[0]

    ids, mask = torch.randint(0, 100, (2, 5)), torch.ones(2, 5, dtype=torch.int64)
    axes = {n: {0: "batch", 1: "sequence"} for n in NAMES}
    return export_quiet(Wrapped(), (ids, mask), opset=17, input_names=NAMES, dynamic_axes=axes)


def _feeds(shape, seed):
    rng = np.random.default_rng(seed)
    mask = np.ones(shape, np.int64)
    mask[-1, -2:] = 0
    return {"input_ids": rng.integers(0, 100, shape).astype(np.int64), "attention_mask": mask}


def test_bert_qkv_becomes_one_product(monkeypatch, tmp_path):
    data = _bert()
    shapes = {n: PROFILE for n in NAMES}
    engine = tfg.build(data, shapes=shapes, device="cpu")
    with monkeypatch.context() as m:
        m.setattr(pipeline, "PASSES", [p for p in pipeline.PASSES if p[0] != "horizontal-gemm"])
        unfused = tfg.build(data, shapes=shapes, device="cpu")
    before, after = ops(unfused), ops(engine)
    assert before.count("Split") == 0 and after.count("Split") == 2            # one per encoder layer
    assert after.count("MatMulEpilogue") == before.count("MatMulEpilogue") - 4   # 3 → 1 in each of 2 layers
    assert engine.data.build_info["passes"]["horizontal-gemm"] == 2
    wide = [layer for layer in engine.data.layers if layer.op == "MatMulEpilogue" and
            layer.name.endswith("/horizontal_gemm")]
    assert len(wide) == 2 and all(tuple(engine.data.constants[w.inputs[1]].shape) == (32, 96) for w in wide)
    engine.save(tmp_path / "bert.engine")
    reloaded = tfg.load(tmp_path / "bert.engine", device="cpu")
    for i, shape in enumerate([(2, 5), (3, 7)]):
        feeds = _feeds(shape, i)
        want = ort_run(data, feeds)
        assert_close(engine.run(dict(feeds)), want, 1e-3, 1e-4, f"{shape} built: ")
        assert_close(reloaded.run(dict(feeds)), want, 1e-3, 1e-4, f"{shape} reloaded: ")
        assert_close(engine.run(dict(feeds)), unfused.run(dict(feeds)), 1e-4, 1e-5, f"{shape} vs unfused: ")


def test_bert_attention_reads_views_of_the_product(monkeypatch):
    """q, k, v reach torch's SDPA as strided views sharing the one product's storage: no copies."""
    data = _bert()
    engine = tfg.build(data, shapes={n: PROFILE for n in NAMES}, device="cpu")
    attention = [layer for layer in engine.data.layers if layer.op == "Attention"]
    assert len(attention) == 2 and all(layer.tactic.startswith("attention.torch_sdpa") for layer in attention)
    seen = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, **kw):
        seen.append((q, k, v))
        return sdpa(q, k, v, **kw)
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    feeds = _feeds((2, 5), 3)
    assert_close(engine.run(dict(feeds)), ort_run(data, feeds), 1e-3, 1e-4)
    assert len(seen) == 2
    for q, k, v in seen:
        storage = {t.untyped_storage().data_ptr() for t in (q, k, v)}
        assert len(storage) == 1, "q, k, v were copied out of the fused product"
        assert not q.is_contiguous() and q.shape == (2, 2, 5, 16)


def _model(nodes, inputs, outputs, inits, opset=17) -> bytes:
    graph = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def _vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def _w(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_gemm_siblings_with_absent_bias_and_a_rejected_matmul():
    inits = {"w1": _w(5, 4, seed=1), "c1": _w(5, seed=2), "w2": _w(3, 4, seed=3), "w3": _w(4, 6, seed=4)}
    nodes = [helper.make_node("Gemm", ["x", "w1", "c1"], ["y1"], transB=1, beta=2.0),
             helper.make_node("Gemm", ["x", "w2"], ["y2"], transB=1),
             helper.make_node("MatMul", ["x", "w3"], ["y3"])]
    model = _model(nodes, [_vi("x", [3, 4])], [_vi("y1", None), _vi("y2", None), _vi("y3", None)], inits)
    engine, log = check_fused(model, {"x": _w(3, 4, seed=9)})
    assert sorted(ops(engine)) == ["MatMul", "MatMulEpilogue", "Split"]
    fused = next(layer for layer in engine.data.layers if layer.op == "MatMulEpilogue")
    bias = engine.data.constants[fused.inputs[2]]
    torch.testing.assert_close(bias, torch.cat([2 * torch.from_numpy(inits["c1"]), torch.zeros(3)]))
    assert "not applied at 'MatMul_2': its trans_b 0 differs from 1 of sibling 'Gemm_0'" in log


def test_different_activations_are_not_fused():
    inits = {"w1": _w(4, 5, seed=1), "b1": _w(5, seed=2), "w2": _w(4, 5, seed=3), "b2": _w(5, seed=4)}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["p1"]), helper.make_node("Add", ["p1", "b1"], ["q1"]),
             helper.make_node("Relu", ["q1"], ["y1"]),
             helper.make_node("MatMul", ["x", "w2"], ["p2"]), helper.make_node("Add", ["p2", "b2"], ["q2"]),
             helper.make_node("Sigmoid", ["q2"], ["y2"])]
    model = _model(nodes, [_vi("x", [2, 3, 4])], [_vi("y1", None), _vi("y2", None)], inits)
    engine, log = check_fused(model, {"x": _w(2, 3, 4, seed=9)})
    assert ops(engine) == ["MatMulEpilogue", "MatMulEpilogue"]
    assert f"rule {RULE.name}: not applied" in log
    assert "activation (name, alpha, beta)" in log and "'Sigmoid'" in log and "'Relu'" in log


def test_residuals_are_not_fused():
    """s2 = x·W2 + b2 + s1 reads its sibling's output; s3 = x·W3 + r adds a residual input."""
    inits = {"w1": _w(4, 4, seed=1), "w2": _w(4, 4, seed=2), "b2": _w(4, seed=3), "w3": _w(4, 4, seed=4)}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["s1"]),
             helper.make_node("MatMul", ["x", "w2"], ["p2"]), helper.make_node("Add", ["p2", "b2"], ["q2"]),
             helper.make_node("Add", ["q2", "s1"], ["s2"]),
             helper.make_node("MatMul", ["x", "w3"], ["p3"]), helper.make_node("Add", ["p3", "r"], ["s3"])]
    model = _model(nodes, [_vi("x", [2, 3, 4]), _vi("r", [2, 3, 4])],
                   [_vi("s1", None), _vi("s2", None), _vi("s3", None)], inits)
    engine, log = check_fused(model, {"x": _w(2, 3, 4, seed=8), "r": _w(2, 3, 4, seed=9)})
    assert "Split" not in ops(engine) and ops(engine).count("MatMulEpilogue") == 2
    assert "it reads 's1', the output of its sibling 'MatMul_0'" in log
    assert "it adds the residual 'r'" in log
    assert "every sibling reading the same input was rejected" in log


def test_runtime_weights_and_mixed_dtypes_are_rejected():
    """Straight on the IR: a weight fed at run time, and a float64 weight on a float32 A."""
    net = Network()
    net.add_input("x", torch.float32, (2, 4))
    net.add_input("w_in", torch.float32, (4, 3))
    w = net.add_constant("w", torch.randn(4, 3))
    w64 = net.add_constant("w64", torch.randn(4, 3, dtype=torch.float64))
    for name, weight in (("a", w), ("b", "w_in"), ("c", w64)):
        net.add_layer("MatMul", ["x", weight], [name], name=name)
        net.mark_output(name)
    rejections = []
    assert fuse_horizontal_gemms(net, shape_points=[{"x": (2, 4), "w_in": (4, 3)}], rejections=rejections) == 0
    reasons = {r.layer: r.reason for r in rejections}
    assert reasons["b"] == "the weight 'w_in' is computed at run time"
    assert reasons["c"] == "A is torch.float32 but the weight 'w64' is torch.float64"
    assert [layer.op for layer in net.layers] == ["MatMul"] * 3


def test_build_verbose_names_the_rule():
    inits = {"w1": _w(4, 2, seed=1), "w2": _w(4, 3, seed=2)}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["y1"]), helper.make_node("MatMul", ["x", "w2"], ["y2"])]
    model = _model(nodes, [_vi("x", [2, 4])], [_vi("y1", None), _vi("y2", None)], inits)
    engine, log = build_logged(model)
    assert ops(engine) == ["MatMulEpilogue", "Split"] and f"rule {RULE.name}: applied 1 time(s)" in log
    feeds = {"x": _w(2, 4, seed=5)}
    assert_close(engine.run(dict(feeds)), ort_run(model, feeds), 1e-5, 1e-6)
