"""Cast/CastLike to and from the low-precision types, and uint16/32/64 arithmetic.

Casts run the real path (parse → build → engine → run, through tensorforge.backend.run_node) and are
compared bit for bit with onnx.reference; where onnx.reference (ml_dtypes) departs from the ONNX spec's
tables (NaN → float4e2m1, ±Inf → float8e8m0) the spec's table is the oracle. Unsigned arithmetic calls the
IR references directly and compares with numpy's wrap-around arithmetic.
"""

import ml_dtypes
import numpy as np
import onnx.reference
import pytest
import torch
from onnx import TensorProto, helper

from tensorforge.parser import parse_model
from tensorforge.backend import run_node
from tensorforge.builder.precision import convert_precision
from tensorforge.ir import Network
from tensorforge.ir.opspec import get_spec
from tensorforge.util.errors import ModelError

_F8 = {"FLOAT8E4M3FN": TensorProto.FLOAT8E4M3FN, "FLOAT8E4M3FNUZ": TensorProto.FLOAT8E4M3FNUZ,
       "FLOAT8E5M2": TensorProto.FLOAT8E5M2, "FLOAT8E5M2FNUZ": TensorProto.FLOAT8E5M2FNUZ}
_SPECIALS = [0.0, -0.0, 1e-7, -1e-7, -1e-9, 2.0 ** -10, 2.0 ** -17, 0.47892547, -0.7229038, 1.0625, 3.3,
             240.0, 248.0, 256.0, 448.0, 464.0, 465.0, -480.0, 57344.0, 61440.0, 61441.0, 1e6, -1e6,
             np.inf, -np.inf, np.nan]


def _cast_node(to, op="Cast", **attrs):
    if op == "CastLike":
        return helper.make_node("CastLike", ["x", "like"], ["y"], **attrs)
    return helper.make_node("Cast", ["x"], ["y"], to=to, **attrs)


def _reference(node, *inputs):
    names = [n for n in node.input if n]
    return onnx.reference.ReferenceEvaluator(node).run(None, dict(zip(names, inputs)))[0]


def _assert_same_bits(got, want):
    """Same dtype and shape; NaN where want is NaN, identical bytes elsewhere (signed zeros included)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    carrier = f"u{got.dtype.itemsize}"
    if got.dtype.kind == "V" or got.dtype.name.startswith(("float", "bfloat")):
        nan_g, nan_w = np.isnan(got.astype(np.float32)), np.isnan(want.astype(np.float32))
        np.testing.assert_array_equal(nan_g, nan_w)
        np.testing.assert_array_equal(got.view(carrier)[~nan_w], want.view(carrier)[~nan_w])
    else:
        np.testing.assert_array_equal(got.view(carrier), want.view(carrier))


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("to", sorted(_F8))
@pytest.mark.parametrize("src", [np.float32, np.float16])
def test_cast_to_float8_matches_reference(src, to, saturate):
    with np.errstate(over="ignore"):                         # 1e6 and 61441 → inf in float16, on purpose
        x = np.array(_SPECIALS, np.float32).astype(src).reshape(2, 13)
    node = _cast_node(_F8[to], saturate=saturate)
    _assert_same_bits(run_node(node, [x])[0], _reference(node, x))


def test_castlike_passes_saturate_through():
    """CastLike(saturate=0) to float8e4m3fn: out-of-range values become NaN, as in Cast."""
    x = np.array(_SPECIALS, np.float32)
    like = np.zeros(1, ml_dtypes.float8_e4m3fn)
    node = _cast_node(None, "CastLike", saturate=0)
    got = run_node(node, [x, like])[0]
    _assert_same_bits(got, _reference(node, x, like))
    assert np.isnan(got.astype(np.float32)[x == 1e6]).all()


def test_castlike_ir_op_uses_cast_rules():
    """The IR CastLike (like's dtype known only at run time) equals Cast to that dtype, saturate included."""
    x = torch.tensor([1e6, -np.inf, 0.3, np.nan])
    like = torch.zeros(1, dtype=torch.float8_e4m3fn)
    for sat in (0, 1):
        got = get_spec("CastLike").reference(x, like, saturate=sat)
        want = get_spec("Cast").reference(x, "float8_e4m3fn", saturate=sat)
        assert got.dtype == torch.float8_e4m3fn
        assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))


_E8M0_IN = [0.0, 1e-40, 2.0 ** -127, 2.0 ** -126, 0.124, 0.25, 0.3, 0.375, 0.5, 1.1, 1.5, 1.75, 3.0, 8.0,
            1000.0, 2.0 ** 126, 1.5 * 2.0 ** 126, 2.0 ** 127, 1.5 * 2.0 ** 127, 3.0e38]


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("round_mode", ["up", "down", "nearest"])
def test_cast_to_float8e8m0_matches_reference(round_mode, saturate):
    x = np.array(_E8M0_IN, np.float32)
    node = _cast_node(TensorProto.FLOAT8E8M0, saturate=saturate, round_mode=round_mode)
    _assert_same_bits(run_node(node, [x])[0], _reference(node, x))


@pytest.mark.parametrize("saturate", [1, 0])
def test_cast_to_float8e8m0_specials_follow_spec_table(saturate):
    """NaN → NaN; ±Inf → E8M0_MAX (2^127, code 254) with saturate, NaN without (ONNX Cast's table)."""
    x = np.array([np.nan, np.inf, -np.inf], np.float32)
    got = run_node(_cast_node(TensorProto.FLOAT8E8M0, saturate=saturate), [x])[0].view(np.uint8)
    inf_code = 254 if saturate else 255
    np.testing.assert_array_equal(got, [255, inf_code, inf_code])


def test_float8e8m0_to_float_round_trip():
    codes = np.array([0, 1, 100, 127, 128, 254, 255], np.uint8)
    x = codes.view(ml_dtypes.float8_e8m0fnu)
    node = _cast_node(TensorProto.FLOAT)
    _assert_same_bits(run_node(node, [x])[0], _reference(node, x))


@pytest.mark.parametrize("src", [np.float32, np.float16])
def test_cast_to_float4_matches_reference(src):
    """Every quarter in [-7, 7] (ties, saturation), tiny values of both signs, ±0 and ±Inf."""
    vals = np.concatenate([np.arange(-28, 29) / 4.0, [1e-7, -1e-7, -0.0, 0.0, 100.0, -100.0, np.inf, -np.inf]])
    x = vals.astype(src)
    node = _cast_node(TensorProto.FLOAT4E2M1)
    _assert_same_bits(run_node(node, [x])[0], _reference(node, x))


def test_cast_nan_to_float4_is_plus_six():
    """ONNX docs/technical/float4.md: NaN → 6 (ml_dtypes, hence onnx.reference, writes -0 instead)."""
    x = np.array([np.nan, -np.nan, 1.0], np.float32)
    got = run_node(_cast_node(TensorProto.FLOAT4E2M1), [x])[0]
    np.testing.assert_array_equal(got.view(np.uint8), [7, 7, 2])


@pytest.mark.parametrize("to", [TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT8, TensorProto.BOOL])
def test_cast_from_float4_every_code(to):
    x = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn)
    node = _cast_node(to)
    _assert_same_bits(run_node(node, [x])[0], _reference(node, x))


_SUBBYTE = {"INT4": TensorProto.INT4, "UINT4": TensorProto.UINT4, "INT2": TensorProto.INT2, "UINT2": TensorProto.UINT2}


_SUBBYTE_RANGE = {"INT4": (-8, 7, ml_dtypes.int4), "UINT4": (0, 15, ml_dtypes.uint4),
                  "INT2": (-2, 1, ml_dtypes.int2), "UINT2": (0, 3, ml_dtypes.uint2)}


def _spec_subbyte(x, to):
    """The ONNX spec's cast to a 2/4-bit integer (onnx docs technical/int4.md, int2.md): round to the nearest
    integer, ties to even, then truncate to the low bits (two's complement); integers only truncate. Built with
    numpy integer arithmetic; ml_dtypes only converts the in-range results (which every version agrees on)."""
    lo, hi, np_to = _SUBBYTE_RANGE[to]
    v = np.rint(x.astype(np.float64)).astype(np.int64) if x.dtype.kind == "f" else x.astype(np.int64)
    return (np.mod(v - lo, hi - lo + 1) + lo).astype(np_to)


def test_spec_subbyte_oracle_by_hand():
    x = np.array([-9.0, -8.5, -7.5, -2.5, -0.5, 2.5, 3.5, 7.5, 8.0, 15.0, 16.0], np.float32)
    assert _spec_subbyte(x, "INT4").astype(np.int64).tolist() == [7, -8, -8, -2, 0, 2, 4, -8, -8, -1, 0]
    assert _spec_subbyte(x, "UINT2").astype(np.int64).tolist() == [3, 0, 0, 2, 0, 2, 0, 0, 0, 3, 0]


@pytest.mark.parametrize("to", sorted(_SUBBYTE))
def test_cast_to_subbyte_ints_follows_the_spec(to):
    """Floats round half to even, then every integer wraps into the 2/4-bit range (two's complement) — the
    spec's rule, not ml_dtypes' (0.7 maps out-of-range floats to 0, older releases truncate toward zero)."""
    xf = np.array([-20.0, -9.0, -8.0, -2.7, -2.5, -1.0, -0.5, 0.0, 0.9, 1.5, 2.5, 2.7, 3.0, 7.0, 8.0, 15.0, 16.0,
                   19.5], np.float32)
    xi = np.array([-200, -17, -9, -1, 0, 1, 5, 8, 15, 16, 200, 1 << 20], np.int32)
    node = _cast_node(_SUBBYTE[to])
    for x in (xf, xf.astype(np.float16), xi):
        _assert_same_bits(run_node(node, [x])[0], _spec_subbyte(x, to))


@pytest.mark.parametrize("src", [ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2])
def test_cast_from_subbyte_ints_matches_reference(src):
    x = np.arange(-8, 16).astype(np.int32).astype(src)     # every value of the type, wrapped
    for to in (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT8, TensorProto.UINT8, TensorProto.INT64,
               TensorProto.FLOAT8E4M3FN):
        node = _cast_node(to)
        _assert_same_bits(run_node(node, [x])[0], _reference(node, x))
    # sub-byte → sub-byte: ml_dtypes (so onnx.reference) has no such cast; through int64, which is exact
    for to, np_to in ((TensorProto.INT4, ml_dtypes.int4), (TensorProto.UINT2, ml_dtypes.uint2)):
        _assert_same_bits(run_node(_cast_node(to), [x])[0], x.astype(np.int64).astype(np_to))


def test_cast_bad_round_mode_is_a_model_error():
    node = _cast_node(TensorProto.FLOAT8E8M0, round_mode="sideways")
    with pytest.raises(ModelError, match="round_mode 'sideways'"):
        run_node(node, [np.ones(2, np.float32)])


def test_importer_keeps_cast_modes_only_where_they_act():
    nodes = [helper.make_node("Cast", ["x"], ["a"], to=TensorProto.FLOAT16, saturate=0),
             helper.make_node("Cast", ["x"], ["b"], to=TensorProto.FLOAT8E5M2, saturate=0, round_mode="down"),
             helper.make_node("Cast", ["x"], ["c"], to=TensorProto.FLOAT8E8M0, round_mode="nearest")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info(n, t, [2]) for n, t in
                               (("a", TensorProto.FLOAT16), ("b", TensorProto.FLOAT8E5M2), ("c", TensorProto.FLOAT8E8M0))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
    net = parse_model(model.SerializeToString())
    attrs = [la.attrs for la in net.layers if la.op == "Cast"]
    assert attrs == [{"to": "float16"}, {"to": "float8_e5m2", "saturate": 0},
                     {"to": "float8_e8m0fnu", "saturate": 1, "round_mode": "nearest"}]


def test_fp16_pass_still_rewrites_cast_to_float32():
    net = Network("n")
    net.add_input("x", torch.float32, (3,))
    net.add_layer("Cast", ["x"], ["h"], {"to": "float8_e5m2", "saturate": 0})
    net.add_layer("Cast", ["h"], ["y"], {"to": "float32"})
    net.mark_output("y")
    convert_precision(net, torch.float16, {"y": torch.float32})
    casts = [la.attrs for la in net.layers if la.op == "Cast"]
    assert {"to": "float8_e5m2", "saturate": 0} in casts and {"to": "float16"} in casts


# ---- uint16/32/64 arithmetic: the references against numpy ------------------------------------------------

_UVALS = {np.uint16: [0, 1, 2, 7, 40000, 65535],
          np.uint32: [0, 1, 2, 7, 3_000_000_000, 2 ** 32 - 1],
          np.uint64: [0, 1, 2, 7, 2 ** 63, 2 ** 63 + 5, 12345678901234567890, 2 ** 64 - 1]}


def _pairs(dt):
    a = np.array(_UVALS[dt], dtype=dt)
    return a[:, None], a[None, :]            # every pair, through broadcasting


def _ref(op, *xs, **attrs):
    out = get_spec(op).reference(*[torch.from_numpy(np.ascontiguousarray(x)) for x in xs], **attrs)
    return out.numpy()


@pytest.mark.parametrize("dt", sorted(_UVALS, key=lambda d: np.dtype(d).itemsize))
def test_uint_arithmetic_wraps_like_numpy(dt):
    a, b = _pairs(dt)
    nz = np.where(b == 0, dt(3), b)
    with np.errstate(over="ignore"):
        cases = {"Add": (a + b, (a, b)), "Sub": (a - b, (a, b)), "Mul": (a * b, (a, b)),
                 "Div": (a // nz, (a, nz)), "Max": (np.maximum(a, b), (a, b)), "Min": (np.minimum(a, b), (a, b)),
                 "Sum": (a + b + a, (a, b, a))}
    for op, (want, args) in cases.items():
        got = _ref(op, *args)
        assert got.dtype == want.dtype, op
        np.testing.assert_array_equal(got, want, err_msg=op)
    for fmod in (0, 1):
        np.testing.assert_array_equal(_ref("Mod", a, nz, fmod=fmod), a % nz)


@pytest.mark.parametrize("dt", sorted(_UVALS, key=lambda d: np.dtype(d).itemsize))
def test_uint_comparisons_and_unary_match_numpy(dt):
    a, b = _pairs(dt)
    for op, fn in {"Less": np.less, "LessOrEqual": np.less_equal, "Greater": np.greater,
                   "GreaterOrEqual": np.greater_equal, "Equal": np.equal}.items():
        np.testing.assert_array_equal(_ref(op, a, b), fn(a, b), err_msg=op)
    x = np.array(_UVALS[dt], dtype=dt)
    lo, hi = np.array(2, dt), np.array(_UVALS[dt][-2], dt)
    np.testing.assert_array_equal(_ref("Clip", x, lo, hi), np.clip(x, lo, hi))
    np.testing.assert_array_equal(_ref("Abs", x), x)
    np.testing.assert_array_equal(_ref("Sign", x), np.sign(x))


def test_uint64_division_over_the_whole_range():
    """Random 64-bit dividends and divisors of every magnitude (a 2^k scale each), quotient and remainder."""
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2 ** 64, size=400, dtype=np.uint64, endpoint=False)
    b = rng.integers(1, 2 ** 64, size=400, dtype=np.uint64) >> rng.integers(0, 64, size=400).astype(np.uint64)
    b = np.maximum(b, np.uint64(1))
    np.testing.assert_array_equal(_ref("Div", a, b), a // b)
    np.testing.assert_array_equal(_ref("Mod", a, b, fmod=0), a % b)


def test_uint_ops_through_the_engine():
    """uint64 Sub wrapping below zero and Greater above 2^63, built and run as engines."""
    a = np.array([0, 5, 2 ** 63 + 1, 2 ** 64 - 1], np.uint64)
    b = np.array([1, 5, 2 ** 63, 1], np.uint64)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(run_node(helper.make_node("Sub", ["a", "b"], ["c"]), [a, b])[0], a - b)
    np.testing.assert_array_equal(run_node(helper.make_node("Greater", ["a", "b"], ["c"]), [a, b])[0], a > b)
    np.testing.assert_array_equal(run_node(helper.make_node("Mod", ["a", "b"], ["c"]), [a, b])[0], a % b)
