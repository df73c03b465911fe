"""com.microsoft MultiHeadAttention against onnxruntime (rtol 1e-3, atol 1e-4): self and cross attention with
bias, every key_padding_mask form onnxruntime's CPU kernel runs, attention_bias, unidirectional, past/present KV,
BNSH key/value, custom scale and mask_filter_value; packed QKV/KV (which onnxruntime's CPU kernel does not run)
against onnxruntime on the same tensors unpacked; a model written by onnxruntime's transformer optimizer
(a BERT-style encoder layer, use_multi_head_attention); refusals with a reason."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from oracle import assert_close, check_against_ort, ort_run
from tensorforge.util.errors import TensorforgeError, UnsupportedOpError

F, I32 = TensorProto.FLOAT, TensorProto.INT32
RNG = np.random.default_rng(7)
B, S, L, N, H = 2, 4, 5, 2, 8
D = N * H



@pytest.fixture(autouse=True, params=["torch_sdpa", "torch_ref"])
def tactic(request, monkeypatch):
    """Every case runs twice against onnxruntime: through the SDPA tactic, and through the op's reference (the
    tactic hidden from the registry)."""
    from tensorforge.kernels import registry
    if request.param == "torch_ref":
        monkeypatch.setitem(registry._TACTICS, "MultiHeadAttention", [])
    return request.param


def _chosen(engine):
    return [la.tactic for la in engine.data.layers if la.op == "MultiHeadAttention"]

def _f(*shape, scale=1.0):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


def _model(ins, feeds, outs=("y",), inits=None, **attrs):
    node = helper.make_node("MultiHeadAttention", ins, list(outs), domain="com.microsoft", num_heads=N, **attrs)
    graph_inputs = [helper.make_tensor_value_info(k, I32 if v.dtype == np.int32 else F, list(v.shape))
                    for k, v in feeds.items()]
    g = helper.make_graph([node], "g", graph_inputs, [helper.make_tensor_value_info(o, F, None) for o in outs if o],
                          [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 9
    return m


def _lengths():
    return np.array([L, 3], np.int32)


def _mask2(t):
    m = np.ones((B, t), np.int32)
    m[1, -2:] = 0
    return m


@pytest.mark.parametrize("case", ["self", "self_bias", "cross_bias", "len_mask", "mask2d", "mask3d", "attn_bias",
                                  "unidirectional", "scale", "filter_value"])
def test_mha(case):
    q, k, v = _f(B, S, D), _f(B, L, D), _f(B, L, D)
    feeds = {"q": q}
    ins = ["q"]
    attrs, inits = {}, {}
    if case == "self" or case == "unidirectional":
        ins = ["q", "q", "q"]
        if case == "unidirectional":
            attrs["unidirectional"] = 1
    else:
        feeds.update(k=k, v=v)
        ins = ["q", "k", "v"]
    if case in ("self_bias", "cross_bias"):
        inits["bias"] = _f(3 * D, scale=0.3)
        ins.append("bias")
        if case == "self_bias":
            ins[1:3] = ["q", "q"]
            del feeds["k"], feeds["v"]
    if case in ("len_mask", "mask2d", "mask3d", "filter_value"):
        ins += ["", "m"][len(ins) - 3:] if len(ins) == 3 else ["m"]
        ins = ins[:3] + ["", "m"]
        feeds["m"] = {"len_mask": _lengths(), "mask2d": _mask2(L), "filter_value": _mask2(L),
                      "mask3d": RNG.integers(0, 2, (B, S, L)).astype(np.int32) | np.eye(S, L, dtype=np.int32)}[case]
        if case == "filter_value":
            attrs["mask_filter_value"] = -50.0
    if case == "attn_bias":
        ins += ["", "", "ab"]
        feeds["ab"] = _f(1, N, S, L)
    if case == "scale":
        attrs["scale"] = 0.2
    check_against_ort(_model(ins, feeds, inits=inits, **attrs), feeds)


@pytest.mark.parametrize("with_mask,unidirectional", [(False, 0), (True, 0), (False, 1)])
def test_mha_past_present(with_mask, unidirectional):
    past = 3
    feeds = {"q": _f(B, S, D), "k": _f(B, S, D), "v": _f(B, S, D), "pk": _f(B, N, past, H), "pv": _f(B, N, past, H)}
    ins = ["q", "k", "v", "bias", "m" if with_mask else "", "", "pk", "pv"]
    if with_mask:
        feeds["m"] = _mask2(past + S)
    model = _model(ins, feeds, outs=("y", "present_k", "present_v"), inits={"bias": _f(3 * D, scale=0.3)},
                   unidirectional=unidirectional)
    check_against_ort(model, feeds)


def test_mha_unidirectional_cross_attention_refused():
    """Causal attention with L ≠ S new keys: onnxruntime masks rows 0..S−2 by j ≤ i and leaves the last row
    unmasked; refused with the reason (at build time when the shapes are static, as here)."""
    feeds = {"q": _f(B, S, D), "k": _f(B, L, D), "v": _f(B, L, D)}
    with pytest.raises(TensorforgeError, match="new keys"):
        tfg.build(_model(["q", "k", "v"], feeds, unidirectional=1).SerializeToString(), device="cpu")


def test_mha_bnsh_key_value_and_qk_output():
    feeds = {"q": _f(B, S, D), "k": _f(B, N, L, H), "v": _f(B, N, L, H)}
    check_against_ort(_model(["q", "k", "v"], feeds), feeds)
    feeds = {"q": _f(B, S, D), "k": _f(B, L, D), "v": _f(B, L, D), "m": _mask2(L), "ab": _f(B, 1, S, L)}
    check_against_ort(_model(["q", "k", "v", "", "m", "ab"], feeds, outs=("y", "", "", "qk")), feeds)


def test_mha_packed_against_unpacked():
    """Packed QKV (B, S, N, 3, H) and packed KV (B, L, N, 2, H): onnxruntime's CPU kernel refuses them, so the
    oracle is onnxruntime on the same tensors unpacked into (B, S, N·H)."""
    qkv = _f(B, S, N, 3, H)
    unpacked = {n: qkv[:, :, :, i].reshape(B, S, D) for i, n in enumerate("qkv")}
    want = ort_run(_model(["q", "k", "v"], unpacked).SerializeToString(), unpacked)
    got = tfg.build(_model(["qkv"], {"qkv": qkv}).SerializeToString(), device="cpu").run({"qkv": qkv})
    assert_close(got, want)
    q, kv = _f(B, S, D), _f(B, L, N, 2, H)
    unpacked = {"q": q, "k": kv[:, :, :, 0].reshape(B, L, D), "v": kv[:, :, :, 1].reshape(B, L, D)}
    want = ort_run(_model(["q", "k", "v"], unpacked).SerializeToString(), unpacked)
    got = tfg.build(_model(["q", "kv"], {"q": q, "kv": kv}).SerializeToString(), device="cpu").run({"q": q, "kv": kv})
    assert_close(got, want)


class _Encoder:
    """A BERT-style encoder layer (the classic (1 − mask)·−10000 mask, x·Wᵀ + b projections), random weights."""

    @staticmethod
    def module():
        import torch

        class Encoder(torch.nn.Module):
            def __init__(self, d=64, n=4):
                super().__init__()
                self.n, self.d = n, d
                self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))
                self.ln = torch.nn.LayerNorm(d)

            def heads(self, x):
                return x.view(x.shape[0], x.shape[1], self.n, self.d // self.n).permute(0, 2, 1, 3)

            def forward(self, x, mask):
                def lin(m, t):
                    return torch.matmul(t, m.weight.t()) + m.bias
                ext = (1.0 - mask[:, None, None, :].to(x.dtype)) * -10000.0
                q, k, v = self.heads(lin(self.q, x)), self.heads(lin(self.k, x)), self.heads(lin(self.v, x))
                p = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / (self.d // self.n) ** 0.5 + ext, -1)
                c = torch.matmul(p, v).permute(0, 2, 1, 3).contiguous()
                return self.ln(lin(self.o, c.view(c.shape[0], c.shape[1], self.d)) + x)
        return Encoder()


def test_mha_from_transformer_optimizer(tmp_path):
    """onnxruntime.transformers' BERT fusion with use_multi_head_attention writes MultiHeadAttention (+ key padding
    mask) for a random-weight encoder exported by torch."""
    import torch
    import warnings
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model
    torch.manual_seed(0)
    x = torch.randn(2, 8, 64)
    mask = torch.ones(2, 8, dtype=torch.int64)
    mask[1, -3:] = 0
    path = tmp_path / "enc.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(_Encoder.module().eval(), (x, mask), str(path), input_names=["x", "mask"],
                          output_names=["y"], opset_version=17, dynamo=False)
        options = FusionOptions("bert")
        options.use_multi_head_attention = True
        opt = optimize_model(str(path), model_type="bert", num_heads=4, hidden_size=64, opt_level=0,
                             optimization_options=options)
    ops = [n.op_type for n in opt.model.graph.node]
    assert "MultiHeadAttention" in ops, ops
    out = tmp_path / "enc_mha.onnx"
    opt.save_model_to_file(str(out))
    check_against_ort(out.read_bytes(), {"x": x.numpy(), "mask": mask.numpy()})


def test_mha_refusals():
    feeds = {"q": _f(B, S, D), "psl": np.array([1], np.int32)}
    with pytest.raises(UnsupportedOpError, match="past_sequence_length"):
        tfg.build(_model(["q", "q", "q", "", "", "", "", "", "psl"], feeds).SerializeToString(), device="cpu")
    feeds = {"qkv": _f(B, S, N, 3, H)}
    with pytest.raises(UnsupportedOpError, match="bias with packed"):
        tfg.build(_model(["qkv", "", "", "b"], feeds, inits={"b": _f(3 * D)}).SerializeToString(), device="cpu")
    feeds = {"q": _f(B, S, D), "m": np.ones(3 * B + 2, np.int32)}
    with pytest.raises(UnsupportedOpError, match="3B"):
        tfg.build(_model(["q", "q", "q", "", "m"], feeds).SerializeToString(), device="cpu")
    feeds = {"q": _f(B, S, D), "k": _f(B, N, L, H), "v": _f(B, N, L, H)}
    with pytest.raises(UnsupportedOpError, match="present outputs"):
        tfg.build(_model(["q", "k", "v"], feeds, outs=("y", "pk", "pv")).SerializeToString(), device="cpu")


def test_mha_tactic_choice(tactic):
    feeds = {"q": _f(B, S, D), "m": _mask2(S)}
    engine = check_against_ort(_model(["q", "q", "q", "", "m"], feeds), feeds)
    assert _chosen(engine) == ["multiheadattention.torch_sdpa" if tactic == "torch_sdpa" else "any.torch_ref"]
    engine = check_against_ort(_model(["q", "q", "q", "", "m"], feeds, outs=("y", "", "", "qk")), feeds)
    assert _chosen(engine) == ["any.torch_ref"]           # the qk output needs the score matrix
