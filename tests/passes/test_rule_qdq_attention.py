"""Attention → heads merged (Transpose, Reshape) → Q ⇒ AttentionQuantize → Transpose → Reshape (qdq_hoist.py moves the
Q above the views, qdq_producer.py takes it into the attention layer): BERT-base's and ViT's output-projection Q.
Oracles: onnxruntime with graph optimisations off (the exact Q/DQ semantics) for the engine, the unfused build for
the codes; the Triton kernel (TRITON_INTERPRET=1) against the op reference, whose Q is checked against
QuantizeLinear written out."""

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from fusion_helpers import build_logged, export_quiet, ops
from qdq_graphs import check_codes_against_exact, quantize_written_out
from test_rule_attention import SelfAttention, _inputs
from tensorforge.ir import get_spec
from tensorforge.kernels.triton_attention import attention

RNG = np.random.RandomState(5)


def _quantized_projection(o_reader=False, causal=False) -> tuple[bytes, str]:
    """SelfAttention's merged heads o (2, 5, 16) → Q → DQ → MatMul(int8 weights, per column) → Q → DQ → z.
    `causal`: GPT-2's mask from a constant buffer (the fused layer's mask input is then a build-time value)."""
    torch.manual_seed(3)
    x, mask = _inputs()
    m = onnx.load_from_string(export_quiet(SelfAttention(causal=causal), (x, mask), opset=17, dynamo=False))
    g = m.graph
    o = g.output[0].name
    w = RNG.randn(16, 8).astype(np.float32) * 0.3
    ws = (np.abs(w).max(axis=0) / 127).astype(np.float32)
    wq = np.clip(np.round(w / ws), -127, 127).astype(np.int8)
    inits = [numpy_helper.from_array(np.float32(0.02), "s_o"), numpy_helper.from_array(np.int8(0), "z_o"),
             numpy_helper.from_array(wq, "wq"), numpy_helper.from_array(ws, "ws"),
             numpy_helper.from_array(np.zeros(8, np.int8), "wz"),
             numpy_helper.from_array(np.float32(0.05), "s_z"), numpy_helper.from_array(np.int8(0), "z_z")]
    nodes = [helper.make_node("QuantizeLinear", [o, "s_o", "z_o"], ["oq"]),
             helper.make_node("DequantizeLinear", ["oq", "s_o", "z_o"], ["od"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=1),
             helper.make_node("MatMul", ["od", "wd"], ["zf"]),
             helper.make_node("QuantizeLinear", ["zf", "s_z", "z_z"], ["zq"]),
             helper.make_node("DequantizeLinear", ["zq", "s_z", "z_z"], ["z"])]
    g.initializer.extend(inits)
    g.node.extend(nodes)
    outs = [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)]
    if o_reader:
        g.node.append(helper.make_node("Relu", [o], ["o_relu"]))
        outs.append(helper.make_tensor_value_info("o_relu", TensorProto.FLOAT, None))
    del g.output[:]
    g.output.extend(outs)
    return m.SerializeToString(), "z"


@pytest.mark.parametrize("o_reader,causal", [(False, False), (True, False), (False, True)])
def test_attention_takes_the_output_projections_q(o_reader, causal):
    model, z = _quantized_projection(o_reader, causal)
    engine, log = build_logged(model)
    names = ops(engine)
    if o_reader:         # the merged heads are read in float too: the Q stays below the views, with the reason
        assert "AttentionQuantize" not in names and "QuantizeLinear" in names
        assert "also read elsewhere" in log
    else:
        assert names.count("AttentionQuantize") == 1 and "QuantizeLinear" not in names and "Attention" not in names
        layer = next(la for la in engine.data.layers if la.op == "AttentionQuantize")
        assert not layer.outputs[0]                           # O itself is never written
    x, mask = _inputs()
    feeds = {i.name: a for i, a in zip(onnx.load_from_string(model).graph.input, (x.numpy(), mask.numpy()))}
    check_codes_against_exact(model, engine, feeds, z, 0.05, 0.95, 0.3)



@pytest.mark.parametrize("dt", [torch.float16, torch.float32])
@pytest.mark.parametrize("qname,zp", [("int8", 3), ("uint8", 128), ("float8_e4m3fn", 0)])
@pytest.mark.parametrize("store_y", [False, True])
def test_triton_attention_quantize_codes_are_exact(dt, qname, zp, store_y):
    q, k, v = (torch.randn(2, 3, 20, 16).to(dt) for _ in range(3))
    mask = torch.zeros(2, 1, 1, 20)
    mask[1, ..., -4:] = -1e4
    scale = 0.01 if qname != "float8_e4m3fn" else 0.002
    attrs = get_spec("AttentionQuantize").resolve_attrs({"q_scale": scale, "q_zero_point": zp, "q_dtype": qname})
    want_o, want_q = get_spec("AttentionQuantize").reference(q, k, v, mask, **attrs)
    assert torch.equal(want_q.view(torch.uint8), quantize_written_out(want_o, scale, zp, want_q.dtype).view(torch.uint8))
    quant = {"scale": scale, "zero_point": zp, "dtype": qname, "store_y": store_y}
    o, codes = attention(q, k, v, mask, quant=quant)
    assert (o is not None) == store_y
    o_kept = o if store_y else attention(q, k, v, mask, quant={**quant, "store_y": True})[0]
    tol = 2e-3 if dt == torch.float16 else 1e-5
    torch.testing.assert_close(o_kept, want_o, rtol=tol, atol=tol)
    assert codes.stride() == o_kept.stride()                 # laid out as O: the head-merging views stay views
    assert torch.equal(codes.view(torch.uint8), quantize_written_out(o_kept, scale, zp, codes.dtype).view(torch.uint8))
    assert codes.view(torch.uint8).float().std() > 1.0


def test_shape_inference_takes_a_constant_mask_beside_meta_operands():
    """GPT-2's causal mask is a build-time constant (a real tensor) while q, k, v are meta during shape inference:
    inference must not mix the two devices (it did, and GPT-2 INT8 failed to build)."""
    spec = get_spec("AttentionQuantize")
    attrs = spec.resolve_attrs({"q_scale": 0.01, "q_zero_point": 0, "q_dtype": "int8"})
    q = torch.empty(1, 12, 128, 64, dtype=torch.float16, device="meta")
    mask = torch.tril(torch.ones(128, 128, dtype=torch.bool))
    o, codes = spec.infer(q, q, q, mask, **attrs)
    assert o.shape == (1, 12, 128, 64) and o.dtype == torch.float16
    assert codes.shape == o.shape and codes.dtype == torch.int8


def test_the_builders_check_accepts_the_flash_kernels_codes_and_rejects_a_shifted_zero_point():
    """The builder validates a candidate against the op reference: the flash kernel's codes may sit one code away
    where its fp16 output rounds across a boundary (CODE_SLACK_FRACTIONS), never two, and not everywhere."""
    from tensorforge.builder.validation import CODE_SLACK, CODE_SLACK_FRACTIONS, disagreement
    torch.manual_seed(2)
    q, k, v = (torch.randn(2, 4, 40, 32).half() for _ in range(3))
    attrs = get_spec("AttentionQuantize").resolve_attrs({"q_scale": 0.004, "q_zero_point": 0, "q_dtype": "int8"})
    want = list(get_spec("AttentionQuantize").reference(q, k, v, None, **attrs))
    got = list(attention(q, k, v, None, quant={"scale": 0.004, "zero_point": 0, "dtype": "int8", "store_y": True}))
    slack, fraction = CODE_SLACK["AttentionQuantize"], CODE_SLACK_FRACTIONS["AttentionQuantize"]
    off = (got[1].int() - want[1].int()).abs()
    assert int(off.max()) <= 1 and float((off > 0).float().mean()) <= fraction
    assert disagreement(got, want, False, slack, fraction) is None
    shifted = (got[1].to(torch.int16) + 1).clamp(-128, 127).to(torch.int8)
    assert "codes" in disagreement([got[0], shifted], want, False, slack, fraction)
    scaled = (got[1].float() * 1.03).round().clamp(-128, 127).to(torch.int8)     # a 3 % scale error
    assert "codes" in disagreement([got[0], scaled], want, False, slack, fraction)
