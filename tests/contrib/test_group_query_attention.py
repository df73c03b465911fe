"""com.microsoft GroupQueryAttention against onnxruntime (rtol 1e-3, atol 1e-4): the first prompt (with and without
right padding), token generation with a per-batch cache fill (seqlens_k), a subsequent prompt chunk, packed QKV,
rotary (half and interleaved, partial rotary_dim, position_ids), local_window_size, softcap, head_sink,
smooth_softmax, attention_bias, causal=0; a decoder block rewritten by onnxruntime's replace_mha_with_gqa (packed
QKV, rotary, seqlens_k from the attention mask); refusals with a reason."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from oracle import assert_close, check_against_ort, ort_run
from tensorforge.util.errors import UnsupportedOpError

F, I32, I64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64
RNG = np.random.default_rng(13)
NQ, NKV, H = 4, 2, 32       # onnxruntime rotates head sizes that are multiples of 16, rotary_dim multiples of 16



@pytest.fixture(autouse=True, params=["torch_sdpa", "torch_ref"])
def tactic(request, monkeypatch):
    """Every case runs twice against onnxruntime: through the SDPA tactic, and through the op's reference (the
    tactic hidden from the registry)."""
    from tensorforge.kernels import registry
    if request.param == "torch_ref":
        monkeypatch.setitem(registry._TACTICS, "GroupQueryAttention", [])
    return request.param


def _chosen(engine):
    return [la.tactic for la in engine.data.layers if la.op == "GroupQueryAttention"]

def _f(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def _model(ins, feeds, n_out=3, **attrs):
    node = helper.make_node("GroupQueryAttention", ins, ["y", "present_k", "present_v"][:n_out], domain="com.microsoft",
                            num_heads=NQ, kv_num_heads=NKV, **attrs)
    types = {np.dtype(np.int32): I32, np.dtype(np.int64): I64}
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(k, types.get(v.dtype, F), list(v.shape))
                                        for k, v in feeds.items()],
                          [helper.make_tensor_value_info(o, F, None) for o in ["y", "present_k", "present_v"][:n_out]])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 9
    return m


def _rotary_caches(max_pos, rot_dim):
    angles = np.arange(max_pos)[:, None] / (10000 ** (np.arange(0, rot_dim, 2) / rot_dim))[None, :]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def _feeds(b, s, past, seqlens, total, packed=False):
    feeds = {"q": _f(b, s, (NQ + 2 * NKV) * H)} if packed else {"q": _f(b, s, NQ * H), "k": _f(b, s, NKV * H),
                                                               "v": _f(b, s, NKV * H)}
    if past is not None:
        feeds.update(pk=_f(b, NKV, past, H), pv=_f(b, NKV, past, H))
    feeds.update(sk=np.array(seqlens, np.int32), tot=np.array(total, np.int32))
    return feeds


def _ins(feeds, extra=()):
    names = ["q", "k", "v", "pk", "pv", "sk", "tot"] + list(extra)
    return [n if n in feeds else "" for n in names]


CASES = {
    "prompt": dict(b=2, s=5, past=None, seqlens=[4, 4], total=5),
    "prompt_empty_past": dict(b=2, s=5, past=0, seqlens=[4, 4], total=5),
    "decode": dict(b=2, s=1, past=6, seqlens=[5, 3], total=6),
    "decode_grow": dict(b=2, s=1, past=4, seqlens=[4, 2], total=5),
    "chunk": dict(b=1, s=3, past=4, seqlens=[6], total=7),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("attrs", [{}, {"local_window_size": 2}, {"softcap": 2.0}, {"scale": 0.3},
                                   {"smooth_softmax": 1}])
def test_gqa_cache_cases(case, attrs):
    feeds = _feeds(**CASES[case])
    check_against_ort(_model(_ins(feeds), feeds, **attrs), feeds)


@pytest.mark.parametrize("case", ["prompt", "decode", "chunk"])
@pytest.mark.parametrize("interleaved,rot_dim", [(0, H), (1, H), (0, H // 2)])
def test_gqa_rotary(case, interleaved, rot_dim):
    feeds = _feeds(**CASES[case])
    feeds["cos"], feeds["sin"] = _rotary_caches(16, rot_dim)
    model = _model(_ins(feeds, ["cos", "sin"]), feeds, do_rotary=1, rotary_interleaved=interleaved)
    check_against_ort(model, feeds)


def test_gqa_packed_rotary_position_ids_head_sink_bias():
    feeds = _feeds(**CASES["decode"], packed=True)
    feeds["cos"], feeds["sin"] = _rotary_caches(16, H)
    feeds["pos"] = np.array([[9], [4]], np.int64)
    check_against_ort(_model(_ins(feeds, ["cos", "sin", "pos"]), feeds, do_rotary=1), feeds)
    feeds = _feeds(**CASES["decode"])
    feeds["sink"] = _f(NQ)
    feeds["ab"] = _f(2, 1, 1, 6)
    check_against_ort(_model(_ins(feeds, ["", "", "", "ab", "sink"]), feeds), feeds)


def test_gqa_not_causal():
    feeds = _feeds(**CASES["prompt"])
    check_against_ort(_model(_ins(feeds), feeds, causal=0), feeds)


def test_gqa_padded_prompt():
    """Right-padded first prompt: onnxruntime leaves the padded query rows unspecified, so Y is compared on the
    valid rows; the present caches in full."""
    feeds = _feeds(b=2, s=5, past=None, seqlens=[4, 2], total=5)
    model = _model(_ins(feeds), feeds).SerializeToString()
    want = ort_run(model, feeds)
    got = tfg.build(model, device="cpu").run(dict(feeds))
    assert_close({k: got[k] for k in ("present_k", "present_v")}, {k: want[k] for k in ("present_k", "present_v")})
    assert_close({"y0": got["y"][0], "y1": got["y"][1, :3]}, {"y0": want["y"][0], "y1": want["y"][1, :3]})


def test_gqa_refusals():
    feeds = _feeds(**CASES["decode"])
    feeds["ks"] = np.ones(1, np.float32)
    with pytest.raises(UnsupportedOpError, match="quantized KV cache"):
        tfg.build(_model(_ins(feeds, ["", "", "", "", "", "ks", "ks"]), feeds).SerializeToString(), device="cpu")
    feeds = _feeds(**CASES["decode"])
    with pytest.raises(UnsupportedOpError, match="cos_cache"):
        tfg.build(_model(_ins(feeds), feeds, do_rotary=1).SerializeToString(), device="cpu")
    with pytest.raises(UnsupportedOpError, match="sliding_window_cache"):
        tfg.build(_model(_ins(feeds), feeds, sliding_window_cache=1, local_window_size=2).SerializeToString(),
                  device="cpu")


def test_gqa_tactic_choice(tactic):
    feeds = _feeds(**CASES["decode"])
    engine = check_against_ort(_model(_ins(feeds), feeds), feeds)
    assert _chosen(engine) == ["groupqueryattention.torch_sdpa" if tactic == "torch_sdpa" else "any.torch_ref"]
    engine = check_against_ort(_model(_ins(feeds), feeds, softcap=3.0), feeds)
    assert _chosen(engine) == ["any.torch_ref"]           # softcap: no SDPA hook


def _decoder_layer_with_mha(b, s, past, n, h):
    """A decoder self-attention block as onnxruntime's LLaMA fusion leaves it: MatMul + Add → RotaryEmbedding for Q
    and K, MatMul + Add for V, com.microsoft MultiHeadAttention with past/present (the input of replace_mha_with_gqa)."""
    d = n * h
    inits = {f"w{c}": (RNG.normal(size=(d, d)) * 0.2).astype(np.float32) for c in "qkv"}
    inits.update({f"b{c}": (RNG.normal(size=d) * 0.1).astype(np.float32) for c in "qkv"})
    inits["cos"], inits["sin"] = _rotary_caches(64, h)
    nodes = []
    for c in "qkv":
        nodes += [helper.make_node("MatMul", ["x", f"w{c}"], [f"{c}_mm"]),
                  helper.make_node("Add", [f"{c}_mm", f"b{c}"], [f"{c}_add"])]
    for c in "qk":
        nodes.append(helper.make_node("RotaryEmbedding", [f"{c}_add", "pos", "cos", "sin"], [f"{c}_rot"],
                                      domain="com.microsoft", num_heads=n))
    nodes.append(helper.make_node("MultiHeadAttention", ["q_rot", "k_rot", "v_add", "", "", "", "pk", "pv"],
                                  ["y", "present_k", "present_v"], domain="com.microsoft", num_heads=n,
                                  name="MultiHeadAttention_0"))
    inputs = [helper.make_tensor_value_info("x", F, [b, s, d]), helper.make_tensor_value_info("pos", I64, [b, s]),
              helper.make_tensor_value_info("attention_mask", I64, [b, past + s]),
              helper.make_tensor_value_info("pk", F, [b, n, past, h]),
              helper.make_tensor_value_info("pv", F, [b, n, past, h])]
    g = helper.make_graph(nodes, "decoder", inputs,
                          [helper.make_tensor_value_info(o, F, None) for o in ("y", "present_k", "present_v")],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 9
    return m


@pytest.mark.parametrize("s,past", [(6, 0), (1, 9)])
def test_gqa_written_by_replace_mha_with_gqa(s, past):
    """onnxruntime.transformers.convert_generation.replace_mha_with_gqa turns the block into one packed-QKV
    GroupQueryAttention with do_rotary and seqlens_k / total_sequence_length computed from the attention mask."""
    from onnxruntime.transformers.convert_generation import replace_mha_with_gqa
    from onnxruntime.transformers.onnx_model import OnnxModel
    b, n, h = 2, 2, 32
    model = OnnxModel(_decoder_layer_with_mha(b, s, past, n, h))
    replace_mha_with_gqa(model, "attention_mask", kv_num_heads=0)
    gqa = [nd for nd in model.model.graph.node if nd.op_type == "GroupQueryAttention"]
    assert len(gqa) == 1 and not gqa[0].input[1], [nd.op_type for nd in model.model.graph.node]   # packed QKV
    mask = np.ones((b, past + s), np.int64)
    if past:
        mask[1, -4:-1] = 0      # batch entry 1 has a shorter history: its token sits earlier in the cache
    feeds = {"x": _f(b, s, n * h), "pos": np.tile(np.arange(past, past + s), (b, 1)).astype(np.int64),
             "attention_mask": mask, "pk": _f(b, n, past, h), "pv": _f(b, n, past, h)}
    check_against_ort(model.model, feeds)


def test_gqa_float16():
    """float16 Q/K/V and caches (onnxruntime's CPU kernel runs them, scores in float32): within one float16 ulp."""
    feeds = {k: (v.astype(np.float16) if v.dtype == np.float32 else v) for k, v in _feeds(**CASES["decode"]).items()}
    types = {np.dtype(np.int32): I32, np.dtype(np.float16): TensorProto.FLOAT16}
    node = helper.make_node("GroupQueryAttention", _ins(feeds), ["y", "present_k", "present_v"], domain="com.microsoft",
                            num_heads=NQ, kv_num_heads=NKV)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(k, types[v.dtype], list(v.shape))
                                        for k, v in feeds.items()],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT16, None)
                           for o in ("y", "present_k", "present_v")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 9
    check_against_ort(m, feeds, rtol=1e-3, atol=2e-3)
