"""AddLayerNorm → Q(y) ⇒ AddLayerNormalizationQuantize (passes/rules/qdq_producer.py): a pre-norm block's residual
add, its LayerNorm and the next GEMM's per-tensor Q become one layer writing (Y only where read, S, Q(Y)). Oracles:
onnxruntime with graph optimisations off (every Q/DQ as written) for the engine; the op reference, itself checked
against Add → LayerNorm → QuantizeLinear written out here, for the Triton kernel (TRITON_INTERPRET=1), bit for bit
on the codes of the kernel's own Y."""

import numpy as np
import pytest
import torch

from fusion_helpers import build_logged, ops
from qdq_graphs import G, check_codes_against_exact, quantize_written_out
from tensorforge.ir import get_spec
from tensorforge.kernels.triton_add_layernorm import add_layernorm
from tensorforge.kernels.triton_layernorm import layernorm

RNG = np.random.RandomState(7)


def _prenorm_block(y_reader=False):
    """s = x + h (also read by a Relu: the residual stream) → LayerNorm → y → Q → DQ → MatMul(int8 w) → Q → DQ → z."""
    g = G(opset=17)
    x, h = g.input("x", [2, 6, 32]), g.input("h", [2, 6, 32])
    s = g.node("Add", [x, h])
    y = g.node("LayerNormalization", [s, g.const((RNG.rand(32) + 0.5).astype(np.float32)),
                                      g.const((RNG.randn(32) * 0.1).astype(np.float32))], axis=-1, epsilon=1e-5)
    z = g.node("MatMul", [g.qdq(y, 0.03, 0, np.int8), g.weight(RNG.randn(32, 24).astype(np.float32) * 0.2, 1)])
    z = g.dq(g.q(z, 0.05, 0, np.int8), 0.05, 0, np.int8)
    r = g.node("Relu", [s])
    g.output(z)
    g.output(r)
    if y_reader:
        g.output(g.node("Sigmoid", [y]))
    return g.model(), z, r


@pytest.mark.parametrize("y_reader", [False, True])
def test_add_layernorm_q_is_one_layer_and_matches_the_exact_qdq(y_reader):
    model, z, r = _prenorm_block(y_reader)
    engine, _ = build_logged(model)
    names = ops(engine)
    assert names.count("AddLayerNormalizationQuantize") == 1
    assert "QuantizeLinear" not in names and "AddLayerNormalization" not in names and "LayerNormalization" not in names
    layer = next(la for la in engine.data.layers if la.op == "AddLayerNormalizationQuantize")
    assert bool(layer.outputs[0]) == y_reader and layer.outputs[1]          # Y only where read; the sum is read
    feeds = {"x": RNG.randn(2, 6, 32).astype(np.float32), "h": RNG.randn(2, 6, 32).astype(np.float32)}
    got, want = check_codes_against_exact(model, engine, feeds, z, 0.05, 0.98, 0.5)
    np.testing.assert_allclose(got[r], want[r], rtol=1e-6, atol=1e-6)



@pytest.mark.parametrize("xdt", [torch.float16, torch.float32])
@pytest.mark.parametrize("qname,zp", [("int8", -3), ("uint8", 128), ("float8_e4m3fn", 0)])
@pytest.mark.parametrize("keep_sum,store_y", [(True, False), (False, True)])
def test_triton_add_layernorm_quantize_is_bit_exact(xdt, qname, zp, keep_sum, store_y):
    a, b = (torch.randn(3, 5, 48) * 2 + 0.3).to(xdt), torch.randn(3, 5, 48).to(xdt)
    w, bias = torch.rand(48) + 0.5, torch.randn(48) * 0.1
    scale = 0.02 if qname != "float8_e4m3fn" else 0.01
    attrs = get_spec("AddLayerNormalizationQuantize").resolve_attrs(
        {"q_scale": scale, "q_zero_point": zp, "q_dtype": qname})
    want_y, want_s, want_q = get_spec("AddLayerNormalizationQuantize").reference(a, b, w, bias, **attrs)
    s_ref = (a.float() + b.float()).to(xdt)                  # the op reference, written out
    torch.testing.assert_close(want_s, s_ref, rtol=0, atol=0)
    ln = torch.nn.functional.layer_norm(s_ref.float(), (48,), w, bias, 1e-5).to(xdt)
    torch.testing.assert_close(want_y, ln, rtol=1e-3, atol=2e-3)
    assert torch.equal(want_q.view(torch.uint8), quantize_written_out(want_y, scale, zp, want_q.dtype).view(torch.uint8))

    quant = {"scale": scale, "zero_point": zp, "dtype": qname, "store_y": store_y}
    y, s, q = add_layernorm(a, b, w, bias, 1e-5, keep_sum=keep_sum, quant=quant)
    assert (y is not None) == store_y and (s is not None) == keep_sum
    if keep_sum:
        assert torch.equal(s, want_s)
    # with Y unwritten, the codes are checked against Y from the same kernel run with Y kept
    y_kept = y if store_y else add_layernorm(a, b, w, bias, 1e-5, keep_sum=False, quant={**quant, "store_y": True})[0]
    tol = 2e-3 if xdt == torch.float16 else 1e-5
    torch.testing.assert_close(y_kept, want_y, rtol=tol, atol=tol)
    assert q.dtype == want_q.dtype
    assert torch.equal(q.view(torch.uint8), quantize_written_out(y_kept, scale, zp, q.dtype).view(torch.uint8))
    assert q.view(torch.uint8).float().std() > 1.0             # many distinct codes: a wrong scale would show


def test_layernorm_quantize_without_y_writes_only_the_codes():
    x = (torch.randn(4, 7, 64) * 2).half()
    w, b = torch.rand(64) + 0.5, torch.randn(64) * 0.1
    quant = {"scale": 0.02, "zero_point": 0, "dtype": "int8"}
    y, q = layernorm(x, w, b, -1, 1e-5, rows=4, quant=quant)
    none, q2 = layernorm(x, w, b, -1, 1e-5, rows=4, quant={**quant, "store_y": False})
    assert none is None and torch.equal(q, q2)
    assert torch.equal(q, quantize_written_out(y, 0.02, 0, torch.int8))
