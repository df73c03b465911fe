"""QuantizeLinear as a PointwiseChain's step: the chain writes int8/uint8 codes instead of a float tensor a
standalone Q reads back (squeeze-excite's gate Mul → Q in implicit-INT8 mobile nets). Generated code under
TRITON_INTERPRET=1 against the chain reference (each step its op's reference), bit for bit, on values placed at
and around every rounding tie; the program check refuses the forms the generator does not write."""

import numpy as np
import pytest
import torch

from tensorforge.codegen import chain_problem
from test_pointwise_codegen import assert_match, chain, lit, run_both


def _ties(n, scale, seed):
    """float32 values x with x / scale at k + ½ (ties), just off them, and far out of range (saturation)."""
    g = torch.Generator().manual_seed(seed)
    k = torch.randint(-300, 300, (n,), generator=g).float()
    off = torch.tensor([0.0, 0.5, -0.5, 0.4999, 0.5001, 0.25])[torch.randint(0, 6, (n,), generator=g)]
    return ((k + off) * scale).float()


@pytest.mark.parametrize("zp,zdt", [(-3, "int8"), (0, "int8"), (128, "uint8"), (None, None)])
def test_gate_then_quantize_is_the_reference_bit_for_bit(zp, zdt):
    scale = 0.0372
    x = _ties(4096, scale, 1).reshape(4, 16, 64)
    gate = torch.ones(4, 16, 1)            # x · 1 keeps the tie placement exact through the Mul
    consts = [lit(scale)] + ([lit(zp, zdt)] if zp is not None else [])
    args = ["s0", "c0"] + (["c1"] if zp is not None else [])
    out = zdt or "uint8"
    layer = chain([("Mul", ["in0", "in1"], {}), ("QuantizeLinear", args, {})], [torch.float32, torch.float32],
                  out_dtypes=[out], consts=consts)
    got, ref, src = run_both(layer, [x, gate])
    assert "quantize_int" in src and ref[0].dtype == getattr(torch, out)
    assert_match(got, ref)
    codes = ref[0].to(torch.int32)
    lo, hi = (0, 255) if out == "uint8" else (-128, 127)
    assert (codes == lo).any() and (codes == hi).any()              # saturation on both sides was exercised
    # the ONNX formula written out in numpy: the quotient in float32 (IEEE), rounded half to even, + zp, saturated
    want = np.clip(np.round(x.numpy() / np.float32(scale)) + (zp or 0), lo, hi)
    assert np.array_equal(codes.numpy(), want)


def test_half_chain_quantizes_its_float32_value():
    """A float16 chain holds float32 between steps; Q reads that value (the chain reference does the same)."""
    x = torch.randn(2, 8, 33, dtype=torch.float16)
    layer = chain([("HardSwish", ["in0"], {}), ("QuantizeLinear", ["s0", "c0", "c1"], {})], [torch.float16],
                  out_dtypes=["int8"], consts=[lit(0.02), lit(5, "int8")])
    got, ref, _ = run_both(layer, [x])
    assert_match(got, ref)


def test_a_wrong_rounding_is_caught(monkeypatch):
    """The check above can fail: rounding half away from zero (a plain round-to-nearest) changes tie codes."""
    from tensorforge.codegen import fastmath
    src, deps = fastmath.HELPERS["quantize_int"]
    monkeypatch.setitem(fastmath.HELPERS, "quantize_int",
                        (src.replace("((v + 12582912.0) - 12582912.0)", "tl.floor(v + 0.5)"), deps))
    x = _ties(2048, 0.05, 3).reshape(2, 1024)
    layer = chain([("Relu", ["in0"], {}), ("QuantizeLinear", ["s0", "c0", "c1"], {})], [torch.float32],
                  out_dtypes=["int8"], consts=[lit(0.05), lit(0, "int8")])
    got, ref, _ = run_both(layer, [x])
    assert not torch.equal(got[0], ref[0])


@pytest.mark.parametrize("args,consts,attrs,why", [
    (["s0", "in1"], [], {}, "literal float32 scale"),
    (["s0", "c0", "c1"], [lit(0.1), lit(1.0)], {}, "int8/uint8 zero point"),
    (["s0", "c0"], [lit(0.1, "float16")], {}, "literal float32 scale"),
    (["s0", "c0"], [lit(0.1)], {"precision": "float16"}, "per tensor in float32"),
    (["s0", "c0"], [lit(0.1)], {"block_size": 32}, "per tensor in float32"),
])
def test_program_check_refuses_other_forms(args, consts, attrs, why):
    layer = chain([("Relu", ["in0"], {}), ("QuantizeLinear", args, attrs)], [torch.float32, torch.float32],
                  out_dtypes=["int8"], consts=consts)
    assert why in chain_problem(layer.attrs, 2)
