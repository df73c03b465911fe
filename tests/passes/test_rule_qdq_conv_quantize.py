"""conv-quantize (passes/rules/qdq_producer.py, after conv-pool): a float convolution's output read by the next
quantized convolution's per-tensor Q ⇒ FusedConvQuantize (the epilogue writes the codes); squeeze-excite's pooled
vector read by a Q ⇒ FusedConvPoolQuantize (the pooling pass writes them). Oracles: onnxruntime with graph
optimisations off (the exact Q/DQ semantics) and the unfused build for the engine; the Triton epilogues
(TRITON_INTERPRET=1) against QuantizeLinear of their own float output, bit for bit, and the op reference."""

import numpy as np
import pytest
import torch

from fusion_helpers import build_logged, ops
from qdq_graphs import G, check_codes_against_exact, quantize_written_out
from tensorforge.ir import get_spec
from tensorforge.kernels.triton_conv_epilogue import conv_bias_act_
from tensorforge.kernels.triton_conv_pool import conv_bias_act_pool_

RNG = np.random.RandomState(9)


def _dw_then_quantized_pointwise(se=False):
    """x (2, 8, 9, 9) → depthwise Conv 3×3 + bias → HardSwish → y → Q → DQ → Conv 1×1 (int8 weights) → Q → DQ → z.
    se: y → GlobalAveragePool → Q → DQ → Conv 1×1 (int8) → Sigmoid → gate; y · gate → the pointwise conv's input."""
    g = G(opset=17)
    x = g.input("x", [2, 8, 9, 9])
    y = g.node("Conv", [x, g.const((RNG.randn(8, 1, 3, 3) * 0.4).astype(np.float32)),
                        g.const((RNG.randn(8) * 0.1).astype(np.float32))], group=8, pads=[1, 1, 1, 1])
    y = g.node("HardSwish", [y])
    if se:
        p = g.node("GlobalAveragePool", [y])
        gate = g.node("Conv", [g.qdq(p, 0.01, 0, np.int8), g.weight(RNG.randn(8, 8, 1, 1).astype(np.float32), 0)])
        y = g.node("Mul", [y, g.node("Sigmoid", [gate])])
    z = g.node("Conv", [g.qdq(y, 0.02, 0, np.int8), g.weight(RNG.randn(12, 8, 1, 1).astype(np.float32) * 0.3, 0)])
    z = g.dq(g.q(z, 0.05, 0, np.int8), 0.05, 0, np.int8)
    g.output(z)
    return g.model(), z


@pytest.mark.parametrize("se", [False, True])
def test_float_conv_takes_the_next_quantized_convs_q(se):
    model, z = _dw_then_quantized_pointwise(se)
    engine, _ = build_logged(model)
    names = ops(engine)
    want_op = "FusedConvPoolQuantize" if se else "FusedConvQuantize"
    assert names.count(want_op) == 1 and "GlobalAveragePool" not in names
    layer = next(la for la in engine.data.layers if la.op == want_op)
    if se:
        assert layer.outputs[0] and not layer.outputs[1]    # Y read by the gate; P read only by its Q: not written
    else:
        assert not layer.outputs[0]
    assert "QuantizeLinear" not in names                    # (se: the gated y's Q is the gate chain's last step)
    feeds = {"x": RNG.randn(2, 8, 9, 9).astype(np.float32)}
    check_codes_against_exact(model, engine, feeds, z, 0.05, 0.95, 0.3)


@pytest.mark.parametrize("dt", [torch.float16, torch.float32])
@pytest.mark.parametrize("qname,zp", [("int8", -4), ("uint8", 128), ("float8_e4m3fn", 0)])
@pytest.mark.parametrize("channels_last,store_y", [(False, False), (True, True)])
def test_triton_conv_epilogue_codes_are_exact(dt, qname, zp, channels_last, store_y):
    raw = (torch.randn(2, 6, 5, 7) * 2).to(dt)
    if channels_last:
        raw = raw.contiguous(memory_format=torch.channels_last)
    bias = torch.randn(6).to(dt)
    scale = 0.03 if qname != "float8_e4m3fn" else 0.01
    quant = {"scale": scale, "zero_point": zp, "dtype": qname, "store_y": store_y}
    y_kept = conv_bias_act_(raw.clone(), bias, None, "HardSwish")            # the float epilogue alone
    y, codes = conv_bias_act_(raw.clone(), bias, None, "HardSwish", quant=quant)
    assert (y is not None) == store_y
    if store_y:
        assert torch.equal(y, y_kept)
    assert codes.stride() == y_kept.stride()
    want = quantize_written_out(y_kept, scale, zp, codes.dtype)
    if codes.dtype == torch.float8_e4m3fn:    # equal values: HardSwish's −0.0 may come out as +0.0 (the same value)
        assert torch.equal(codes.float(), want.float())
        assert ((codes.view(torch.uint8) != want.view(torch.uint8)) <= (want.float() == 0)).all()
    else:
        assert torch.equal(codes, want)
    assert codes.view(torch.uint8).float().std() > 1.0
    ref = get_spec("HardSwish").reference(raw.float() + bias.float().reshape(1, -1, 1, 1))     # the float math
    torch.testing.assert_close(y_kept.float(), ref, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("qname,zp", [("int8", 3), ("uint8", 120)])
@pytest.mark.parametrize("store_p", [False, True])
def test_triton_conv_pool_codes_are_exact(qname, zp, store_p):
    raw = (torch.randn(3, 20, 6, 6) * 2).half().contiguous(memory_format=torch.channels_last)
    bias = torch.randn(20).half()
    quant = {"scale": 0.01, "zero_point": zp, "dtype": qname, "store_y": store_p}
    y_kept, p_kept = conv_bias_act_pool_(raw.clone(), bias, None, "Relu", cfg={"BLOCK_C": 16, "BLOCK_HW": 16})
    y, p, codes = conv_bias_act_pool_(raw.clone(), bias, None, "Relu", cfg={"BLOCK_C": 16, "BLOCK_HW": 16},
                                      quant=quant)
    assert torch.equal(y, y_kept) and (p is not None) == store_p
    if store_p:
        assert torch.equal(p, p_kept)
    assert codes.shape == (3, 20, 1, 1)
    assert torch.equal(codes, quantize_written_out(p_kept, 0.01, zp, codes.dtype))
    ref = get_spec("GlobalAveragePool").reference(y_kept.float())
    torch.testing.assert_close(p_kept.float(), ref, rtol=2e-3, atol=2e-3)
    assert codes.float().std() > 1.0


def test_the_fused_quantize_layers_survive_an_engine_round_trip(tmp_path):
    """Engines are data: the new ops' scales travel as attributes in the manifest and load back to the same run."""
    import tensorforge as tfg
    model, z = _dw_then_quantized_pointwise(se=True)
    engine, _ = build_logged(model)
    assert "FusedConvPoolQuantize" in ops(engine)
    path = tmp_path / "se.engine"
    engine.save(str(path))
    again = tfg.load(str(path), device="cpu")
    feeds = {"x": RNG.randn(2, 8, 9, 9).astype(np.float32)}
    np.testing.assert_array_equal(np.asarray(engine.run(dict(feeds))[z]), np.asarray(again.run(dict(feeds))[z]))
    layer = next(la for la in again.data.layers if la.op == "FusedConvPoolQuantize")
    assert layer.attrs["q_scale"] == pytest.approx(0.01) and layer.attrs["q_dtype"] == "int8"
