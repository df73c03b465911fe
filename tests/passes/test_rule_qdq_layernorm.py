"""LayerNorm → Q(y) ⇒ LayerNormalizationQuantize (passes/rules/qdq_producer.py): the fused layer replaces the
QuantizeLinear; the engine's outputs equal the exact Q/DQ semantics (onnxruntime with graph optimisations off)
within one quantization step, mostly exactly; the Triton kernel (TRITON_INTERPRET=1) is bit-exact to the op
reference, which is checked against LayerNorm followed by QuantizeLinear written out here."""

import numpy as np
import pytest
import torch

from fusion_helpers import build_logged, ops
from qdq_graphs import G, ort_exact, quantize_written_out, steps_off
from tensorforge.ir import get_spec
from tensorforge.kernels.triton_layernorm import layernorm

RNG = np.random.RandomState(3)


def _bert_block(per_axis=False, zp=0, dtype=np.int8):
    """x → LayerNorm → y; y → Q → DQ → MatMul(int8 weights) → z; y + x → r (the float residual reader)."""
    g = G(opset=17)
    x = g.input("x", [2, 7, 32])
    y = g.node("LayerNormalization", [x, g.const((RNG.rand(32) + 0.5).astype(np.float32)),
                                      g.const((RNG.randn(32) * 0.1).astype(np.float32))], axis=-1, epsilon=1e-5)
    scale = (RNG.rand(32).astype(np.float32) * 0.02 + 0.02) if per_axis else np.float32(0.03)
    if per_axis:
        yq = g.node("QuantizeLinear", [y, g.const(scale), g.const(np.zeros(32, dtype))], axis=2)
        yd = g.node("DequantizeLinear", [yq, g.const(scale), g.const(np.zeros(32, dtype))], axis=2)
    else:
        yd = g.qdq(y, scale, zp, dtype)
    w = RNG.randn(32, 24).astype(np.float32) * 0.2
    z = g.node("MatMul", [yd, g.weight(w, 1)])
    z = g.dq(g.q(z, 0.05, 0, np.int8), 0.05, 0, np.int8)
    r = g.node("Add", [y, x])
    g.output(z)
    g.output(r)
    return g.model(), (z, r)


@pytest.mark.parametrize("zp,dtype", [(0, np.int8), (120, np.uint8)])
def test_layernorm_q_becomes_one_layer_and_matches_the_exact_qdq(zp, dtype):
    model, (z, r) = _bert_block(zp=zp, dtype=dtype)
    engine, _ = build_logged(model)
    assert ops(engine).count("LayerNormalizationQuantize") == 1
    assert "QuantizeLinear" not in ops(engine) and "LayerNormalization" not in ops(engine)
    feeds = {"x": RNG.randn(2, 7, 32).astype(np.float32)}
    got, want = engine.run(dict(feeds)), ort_exact(model, feeds)
    np.testing.assert_allclose(got[r], want[r], rtol=1e-5, atol=1e-5)
    off = steps_off(got[z], want[z], 0.05)
    assert off.max() <= 1 + 1e-5 and (off < 1e-5).mean() >= 0.98
    assert np.abs(want[z]).max() > 0.5                      # not a constant output


def test_per_axis_q_of_a_layernorm_is_not_fused_and_says_why():
    model, _ = _bert_block(per_axis=True)
    engine, log = build_logged(model)
    assert "LayerNormalizationQuantize" not in ops(engine) and "LayerNormalization" in ops(engine)
    assert "per axis" in log



def _bytes(t):
    return t.view(torch.uint8)


@pytest.mark.parametrize("xdt", [torch.float16, torch.float32])
@pytest.mark.parametrize("qname,zp", [("int8", -3), ("uint8", 128), ("float8_e4m3fn", 0)])
@pytest.mark.parametrize("rows", [1, 4])
def test_triton_layernorm_quantize_is_bit_exact(xdt, qname, zp, rows):
    x = (torch.randn(6, 5, 48) * 2 + 0.3).to(xdt)
    w, b = torch.rand(48) + 0.5, torch.randn(48) * 0.1
    scale = 0.02 if qname != "float8_e4m3fn" else 0.01
    attrs = get_spec("LayerNormalizationQuantize").resolve_attrs(
        {"q_scale": scale, "q_zero_point": zp, "q_dtype": qname})
    want_y, want_q = get_spec("LayerNormalizationQuantize").reference(x, w, b, **attrs)
    # the op reference is LayerNorm in x's dtype, then QuantizeLinear of that rounded y
    ln = torch.nn.functional.layer_norm(x.float(), (48,), w, b, 1e-5).to(xdt)
    torch.testing.assert_close(want_y, ln, rtol=1e-3, atol=2e-3)
    assert torch.equal(_bytes(want_q), _bytes(quantize_written_out(want_y, scale, zp, want_q.dtype)))
    y, q = layernorm(x, w, b, -1, 1e-5, rows=rows, quant={"scale": scale, "zero_point": zp, "dtype": qname})
    torch.testing.assert_close(y, want_y, rtol=1e-3 if xdt == torch.float16 else 1e-5,
                               atol=2e-3 if xdt == torch.float16 else 1e-5)
    # Q of the kernel's own y, exactly as QuantizeLinear computes it (y itself may differ from the reference by
    # a rounding of the statistics)
    assert q.dtype == want_q.dtype and torch.equal(_bytes(q), _bytes(quantize_written_out(y, scale, zp, q.dtype)))
    assert _bytes(q).float().std() > 1.0                      # many distinct codes: a wrong scale would show


def test_layernorm_quantize_survives_an_engine_round_trip_and_fp16(tmp_path):
    import tensorforge as tfg
    model, (z, r) = _bert_block()
    feeds = {"x": RNG.randn(2, 7, 32).astype(np.float32)}
    engine = tfg.build(model, device="cpu", fp16=True)
    layer = next(x for x in engine.data.layers if x.op == "LayerNormalizationQuantize")
    assert engine.data.tensors[layer.inputs[0]].dtype == torch.float16      # Q of the fp16 y, as the graph says
    path = tmp_path / "lnq.engine"
    engine.save(str(path))
    again = tfg.load(str(path), device="cpu")
    a, b = engine.run(dict(feeds)), again.run(dict(feeds))
    for k in a:
        np.testing.assert_array_equal(np.asarray(a[k]), np.asarray(b[k]))


def test_the_builders_check_accepts_the_triton_kernel_and_rejects_a_wrong_code():
    """The builder validates each candidate against the op reference before timing it. The Triton kernel's y may
    round an fp16 ulp away from the reference's (its statistics are summed in another order), and its Q(y) then
    one code away on those elements: the check must accept that (or the capturable kernel loses to the reference
    tactic — seen on the H200 at cfb5fe7: BERT INT8 ran without CUDA graphs), and reject a code two steps off."""
    from tensorforge.builder.tactics import CODE_SLACK, _disagreement
    torch.manual_seed(5)
    x = (torch.randn(64, 768) * 3 + 0.5).half()
    w, b = (torch.rand(768) + 0.5).half(), (torch.randn(768) * 0.1).half()
    attrs = get_spec("LayerNormalizationQuantize").resolve_attrs({"q_scale": 0.011, "q_zero_point": 0,
                                                                  "q_dtype": "int8"})
    want = list(get_spec("LayerNormalizationQuantize").reference(x, w, b, **attrs))
    got = list(layernorm(x, w, b, -1, 1e-5, rows=4, quant={"scale": 0.011, "zero_point": 0, "dtype": "int8"}))
    slack = CODE_SLACK["LayerNormalizationQuantize"]
    assert _disagreement(got, want, False, slack) is None
    bad = got[1].clone()
    bad[3, 7] = (bad[3, 7].to(torch.int16) + 2).clamp(-128, 127).to(torch.int8)
    assert "codes" in _disagreement([got[0], bad], want, False, slack)
    one = got[1].clone()                       # one code off on one element: accepted with the slack only
    one[5, 9] = (one[5, 9].to(torch.int16) + (1 if one[5, 9] < 127 else -1)).to(torch.int8)
    assert _disagreement([got[0], one], want, False, slack) is None
    assert "integer" in _disagreement([got[0], one], want, False, ())
