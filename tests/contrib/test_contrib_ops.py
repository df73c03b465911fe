"""onnxruntime contrib ops (com.microsoft) as single nodes, compared with onnxruntime itself (rtol 1e-3,
atol 1e-4), also after save/load; refusals carry a reason."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from oracle import check_against_ort
from tensorforge.util.errors import UnsupportedOpError

F = TensorProto.FLOAT
RNG = np.random.default_rng(0)


def _model(node, inputs, outputs, inits=()):
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
                          [numpy_helper.from_array(v, k) for k, v in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 9
    return m.SerializeToString()


def _ms(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, domain="com.microsoft", **attrs)


def _f(*shape, scale=1.0):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


@pytest.mark.parametrize("with_bias", [False, True])
def test_fast_gelu(with_bias):
    ins = ["x", "b"] if with_bias else ["x"]
    inits = [("b", _f(16))] if with_bias else []
    model = _model(_ms("FastGelu", ins, ["y"]), [("x", F, [2, 3, 16])], [("y", F)], inits)
    check_against_ort(model, {"x": _f(2, 3, 16, scale=3)})


def test_bias_gelu_and_ms_gelu():
    check_against_ort(_model(_ms("BiasGelu", ["x", "b"], ["y"]), [("x", F, [4, 16])], [("y", F)], [("b", _f(16))]),
                      {"x": _f(4, 16, scale=3)})
    check_against_ort(_model(_ms("Gelu", ["x"], ["y"]), [("x", F, [4, 16])], [("y", F)]), {"x": _f(4, 16, scale=3)})


@pytest.mark.parametrize("alpha", [1.702, 0.5])
def test_quick_gelu(alpha):
    model = _model(_ms("QuickGelu", ["x"], ["y"], alpha=alpha), [("x", F, [3, 8])], [("y", F)])
    check_against_ort(model, {"x": _f(3, 8, scale=3)})


@pytest.mark.parametrize("beta,bias,sum_out", [(True, True, True), (False, False, False), (True, False, True)])
def test_skip_layer_normalization(beta, bias, sum_out):
    ins = ["x", "skip", "gamma", "beta" if beta else "", "bias" if bias else ""]
    while ins and not ins[-1]:
        ins.pop()
    outs = ["y", "", "", "s"] if sum_out else ["y"]
    inits = [("gamma", _f(32)), ("beta", _f(32)), ("bias", _f(32))]
    inits = [(k, v) for k, v in inits if k in ins]
    model = _model(_ms("SkipLayerNormalization", ins, outs, epsilon=1e-5), [("x", F, [2, 5, 32]), ("skip", F, [2, 5, 32])],
                   [(o, F) for o in outs if o], inits)
    check_against_ort(model, {"x": _f(2, 5, 32), "skip": _f(2, 5, 32)})


@pytest.mark.parametrize("ta,tb,alpha", [(0, 0, 1.0), (1, 0, 0.5), (0, 1, 2.0), (1, 1, 0.125)])
def test_fused_matmul(ta, tb, alpha):
    a_shape = [2, 8, 6] if ta else [2, 6, 8]
    b_shape = [2, 5, 8] if tb else [2, 8, 5]
    model = _model(_ms("FusedMatMul", ["a", "b"], ["y"], transA=ta, transB=tb, alpha=alpha),
                   [("a", F, a_shape), ("b", F, b_shape)], [("y", F)])
    check_against_ort(model, {"a": _f(*a_shape), "b": _f(*b_shape)})


@pytest.mark.parametrize("per_column,with_zp,with_bias", [(False, True, True), (True, True, False), (True, False, True)])
def test_matmul_integer_to_float(per_column, with_zp, with_bias):
    a = RNG.integers(0, 256, (3, 4, 16)).astype(np.uint8)
    b = RNG.integers(-128, 128, (16, 8)).astype(np.int8)
    n = 8 if per_column else 1
    inits = [("b", b), ("a_scale", np.array(0.02, np.float32)), ("b_scale", (RNG.random(n) * 0.05 + 0.01).astype(np.float32))]
    ins = ["a", "b", "a_scale", "b_scale"]
    if with_zp:
        inits += [("a_zp", np.array(128, np.uint8)), ("b_zp", RNG.integers(-3, 4, n).astype(np.int8))]
        ins += ["a_zp", "b_zp"]
    if with_bias:
        ins += ([] if with_zp else ["", ""]) + ["bias"]
        inits.append(("bias", _f(8)))
    model = _model(_ms("MatMulIntegerToFloat", ins, ["y"]), [("a", TensorProto.UINT8, [3, 4, 16])], [("y", F)], inits)
    check_against_ort(model, {"a": a})


@pytest.mark.parametrize("signed,with_bias", [(True, True), (False, False)])
def test_dynamic_quantize_matmul(signed, with_bias):
    b = (RNG.integers(-128, 128, (16, 8)).astype(np.int8) if signed else RNG.integers(0, 256, (16, 8)).astype(np.uint8))
    inits = [("b", b), ("b_scale", np.array(0.03, np.float32)),
             ("b_zp", np.array(2 if signed else 130, b.dtype))]
    ins = ["a", "b", "b_scale", "b_zp"]
    if with_bias:
        inits.append(("bias", _f(8)))
        ins.append("bias")
    model = _model(_ms("DynamicQuantizeMatMul", ins, ["y"]), [("a", F, [4, 16])], [("y", F)], inits)
    check_against_ort(model, {"a": _f(4, 16, scale=2)})


def test_refusals_say_why():
    model = _model(_ms("FusedMatMul", ["a", "b"], ["y"], transBatchA=1), [("a", F, [2, 3, 4]), ("b", F, [3, 4, 5])],
                   [("y", F)])
    with pytest.raises(UnsupportedOpError, match="transBatch"):
        tfg.build(model, device="cpu")
    model = _model(_ms("SkipLayerNormalization", ["x", "s", "g"], ["y", "mean"]), [("x", F, [2, 4]), ("s", F, [2, 4])],
                   [("y", F), ("mean", F)], [("g", _f(4))])
    with pytest.raises(UnsupportedOpError, match="mean"):
        tfg.build(model, device="cpu")


@pytest.mark.parametrize("with_mask,unidirectional", [(False, 0), (True, 0), (False, 1), (True, 1)])
def test_attention(with_mask, unidirectional):
    b, s, hidden, heads = 2, 6, 32, 4
    inits = [("w", _f(hidden, 3 * hidden, scale=0.3)), ("bias", _f(3 * hidden, scale=0.1))]
    ins = ["x", "w", "bias"] + (["mask"] if with_mask else [])
    inputs = [("x", F, [b, s, hidden])] + ([("mask", TensorProto.INT32, [b, s])] if with_mask else [])
    model = _model(_ms("Attention", ins, ["y"], num_heads=heads, unidirectional=unidirectional), inputs, [("y", F)],
                   inits)
    feeds = {"x": _f(b, s, hidden)}
    if with_mask:
        feeds["mask"] = np.array([[1] * s, [1] * (s - 2) + [0, 0]], np.int32)
    check_against_ort(model, feeds)


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding(interleaved):
    b, s, heads, d = 2, 5, 2, 8
    cos_sin = np.arange(16)[:, None] * (1.0 / 10000 ** (np.arange(0, d, 2) / d))[None, :]
    inits = [("cos", np.cos(cos_sin).astype(np.float32)), ("sin", np.sin(cos_sin).astype(np.float32))]
    model = _model(_ms("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], interleaved=interleaved, num_heads=heads),
                   [("x", F, [b, s, heads * d]), ("pos", TensorProto.INT64, [b, s])], [("y", F)], inits)
    pos = np.stack([np.arange(s), np.arange(3, 3 + s)]).astype(np.int64)
    check_against_ort(model, {"x": _f(b, s, heads * d), "pos": pos})


@pytest.mark.parametrize("segments,position_ids,outputs", [(True, False, 2), (False, True, 2), (True, True, 3)])
def test_embed_layer_normalization(segments, position_ids, outputs):
    b, s, h, vocab = 2, 7, 16, 30
    i32 = TensorProto.INT32
    inits = [("word", _f(vocab, h)), ("pos", _f(20, h)), ("seg", _f(2, h)), ("gamma", _f(h)), ("beta", _f(h))]
    ins = ["ids", "segs" if segments else "", "word", "pos", "seg" if segments else "", "gamma", "beta", "mask",
           "pids" if position_ids else ""]
    while not ins[-1]:
        ins.pop()
    inputs = [("ids", i32, [b, s]), ("mask", i32, [b, s])] + ([("segs", i32, [b, s])] if segments else []) + \
        ([("pids", i32, [b, s])] if position_ids else [])
    out_names = ["y", "mask_index", "emb_sum"][:outputs]
    out_types = [F, i32, F][:outputs]
    inits = [(k, v) for k, v in inits if k in ins]
    model = _model(_ms("EmbedLayerNormalization", ins, out_names, epsilon=1e-5), inputs, list(zip(out_names, out_types)),
                   inits)
    feeds = {"ids": RNG.integers(0, vocab, (b, s)).astype(np.int32),
             "mask": np.array([[1] * s, [1] * 4 + [0] * (s - 4)], np.int32)}
    if segments:
        feeds["segs"] = RNG.integers(0, 2, (b, s)).astype(np.int32)
    if position_ids:
        feeds["pids"] = np.stack([np.arange(s), np.arange(2, 2 + s)]).astype(np.int32)
    check_against_ort(model, feeds)
