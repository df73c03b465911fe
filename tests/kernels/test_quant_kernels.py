"""Quantized tactics against the op reference (ir/ops/quantized.py), on the CPU: torch._int_mm and the Triton
int8/fp8 GEMM under TRITON_INTERPRET=1 on small shapes. Integer outputs must be bit-exact (the builder checks
them exactly); the reference itself is checked against a float64 DQ → op → Q composition written out here."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from tensorforge.ir import Layer, get_spec
from tensorforge.kernels import quant_int_mm, quant_math, triton_int8_gemm  # noqa: F401
from tensorforge.kernels.registry import candidates

ATTRS = get_spec("QuantizedConv").attrs


def _layer(op, **attrs):
    spec = get_spec(op)
    return Layer("q", op, ["x", "w", "b", "r"], ["y"], spec.resolve_attrs(attrs))


def _q8(shape, dtype=torch.int8):
    lo, hi = (0, 255) if dtype == torch.uint8 else (-128, 127)
    return torch.randint(lo, hi + 1, shape, dtype=torch.int16).to(dtype)


def _hand_reference(x, xs, xz, w, ws, b, ys, yz, relu):
    """DQ → conv (float64) → +b → relu → Q, written out from the ONNX definitions."""
    xf = (x.double() - xz) * xs
    wf = w.double() * torch.tensor(ws, dtype=torch.float64).reshape(-1, 1, 1, 1)
    y = F.conv2d(xf, wf, b.double(), padding=1)
    y = torch.relu(y) if relu else y
    return torch.clamp(torch.round(y / ys) + yz, -128, 127).to(torch.int8)


def test_reference_matches_the_written_out_composition():
    x, w = _q8((2, 4, 6, 6), torch.uint8), _q8((8, 4, 3, 3))
    ws = (torch.rand(8) * 0.01 + 0.001).tolist()
    b = torch.randn(8) * 0.1
    layer = _layer("QuantizedConv", x_dtype="uint8", x_scale=0.02, x_zero_point=100, w_scale=ws, pads=[1, 1, 1, 1],
                   activation="Relu", y_scale=0.05, y_zero_point=-3, y_dtype="int8")
    got = get_spec("QuantizedConv").reference(x, w, b, **layer.attrs)
    want = _hand_reference(x, 0.02, 100, w, ws, b, 0.05, -3, True)
    off = (got.int() - want.int()).abs()
    assert off.max() <= 1 and (off == 0).float().mean() > 0.99    # float64 vs float32 epilogue: rare ties


CASES = [
    # op, x dtype, x zp, y dtype, activation, residual kind, mid
    ("QuantizedMatMul", torch.uint8, 131, "int8", "Relu", None, False),
    ("QuantizedMatMul", torch.int8, -5, "uint8", "none", "quantized", True),
    ("QuantizedMatMul", torch.int8, 0, "float32", "none", "float", False),
    ("QuantizedConv", torch.uint8, 128, "int8", "Clip", None, False),
    ("QuantizedConv", torch.int8, 7, "int8", "Relu", "quantized", True),
    ("QuantizedConv", torch.int8, 0, "float32", "LeakyRelu", None, False),
]


def _inputs(op, xdt, res_kind, y_float):
    if op == "QuantizedMatMul":
        x, w, out = _q8((3, 7, 40), xdt), _q8((24, 40)), (3, 7, 24)
    else:
        x, w, out = _q8((2, 8, 7, 7), xdt), _q8((16, 8, 3, 3)), (2, 16, 7, 7)
    b = torch.randn(24 if op == "QuantizedMatMul" else 16) * 0.2
    r = None if res_kind is None else (_q8(out) if res_kind == "quantized" else torch.randn(out))
    return [x, w, b, r]


def _case_layer(op, xdt, xz, ydt, act, res_kind, mid, n=None):
    n = n or (24 if op == "QuantizedMatMul" else 16)
    attrs = dict(x_dtype="int8" if xdt == torch.int8 else "uint8", x_scale=0.02, x_zero_point=xz,
                 w_scale=(torch.rand(n) * 0.004 + 0.001).tolist(), activation=act,
                 alpha=-0.5 if act == "Clip" else 0.1, beta=1.5, residual_first=0 if act == "LeakyRelu" else 1)
    if op == "QuantizedConv":
        attrs.update(pads=[1, 1, 1, 1], kernel_shape=[3, 3], strides=[1, 1])
    if mid:
        attrs.update(mid_scale=0.03, mid_zero_point=2, mid_dtype="int8")
    if res_kind == "quantized":
        attrs.update(residual_scale=0.04, residual_zero_point=-1)
    if ydt != "float32":
        attrs.update(y_scale=0.05, y_zero_point=3 if ydt == "int8" else 128, y_dtype=ydt)
    return _layer(op, **attrs)


def _compare(got, want):
    if want.dtype.is_floating_point:
        torch.testing.assert_close(got.float(), want.float(), rtol=1e-5, atol=1e-5)
    else:
        assert got.dtype == want.dtype and torch.equal(got, want), (got.int() - want.int()).abs().max()


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[3]}-{c[4]}-{c[5]}")
def test_int_mm_tactic_is_bit_exact(case):
    layer = _case_layer(*case)
    inputs = _inputs(case[0], case[1], case[5], case[3] == "float32")
    want = get_spec(layer.op).reference(*inputs, **layer.attrs)
    found, _ = candidates(layer, torch.device("cpu"))
    tac = next(t for t, _ in found if t.name == "torch_int_mm")
    _compare(tac.build(layer, {}, torch.device("cpu"))(inputs)[0], want)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[3]}-{c[4]}-{c[5]}")
def test_triton_int8_gemm_interpreted_is_bit_exact(case):
    layer = _case_layer(*case)
    inputs = _inputs(case[0], case[1], case[5], case[3] == "float32")
    want = get_spec(layer.op).reference(*inputs, **layer.attrs)
    assert triton_int8_gemm.kernel_reason(layer) is None
    for implicit in ((0, 1) if case[0] == "QuantizedConv" else (0,)):
        cfg = {"BM": 32, "BN": 16, "BK": 32, "G": 2, "stages": 1, "warps": 1, "IMPLICIT": implicit}
        got = triton_int8_gemm.build_kernel(layer, cfg, torch.device("cpu"), interpret=True)(inputs)[0]
        _compare(got, want)


@pytest.mark.parametrize("xdt", [torch.uint8, torch.int8])
def test_triton_implicit_gemm_conv_strided_dilated_channels_last(xdt):
    """The implicit-GEMM addressing: stride 2, dilation 2, asymmetric pads, a channels-last input, 5 input channels
    (k = (r, s, c) crosses tile edges); padding must read the zero point."""
    x = _q8((2, 5, 11, 10), xdt).contiguous(memory_format=torch.channels_last)
    w = _q8((12, 5, 3, 3))
    layer = _layer("QuantizedConv", x_dtype="uint8" if xdt == torch.uint8 else "int8", x_scale=0.02,
                   x_zero_point=77 if xdt == torch.uint8 else -9, w_scale=(torch.rand(12) * 0.01 + 1e-3).tolist(),
                   strides=[2, 2], dilations=[2, 2], pads=[2, 1, 0, 2], kernel_shape=[3, 3],
                   y_scale=0.05, y_zero_point=1, y_dtype="int8")
    want = get_spec("QuantizedConv").reference(x, w, **layer.attrs)
    cfg = {"BM": 16, "BN": 16, "BK": 32, "G": 1, "stages": 1, "warps": 1, "IMPLICIT": 1}
    got = triton_int8_gemm.build_kernel(layer, cfg, torch.device("cpu"), interpret=True)([x, w])[0]
    _compare(got, want)


def test_triton_fp8_gemm_interpreted():
    w = (torch.randn(24, 32) * 2).to(torch.float8_e4m3fn)
    x = (torch.randn(2, 5, 32) * 3).to(torch.float8_e4m3fn)
    layer = _layer("QuantizedMatMul", x_dtype="float8_e4m3fn", x_scale=0.1, w_scale=[0.05], activation="Relu",
                   y_scale=0.02, y_dtype="float8_e4m3fn")
    want = get_spec("QuantizedMatMul").reference(x, w, None, **layer.attrs)
    cfg = {"BM": 16, "BN": 16, "BK": 32, "G": 1, "stages": 1, "warps": 1}
    got = triton_int8_gemm.build_kernel(layer, cfg, torch.device("cpu"), interpret=True)([x, w])[0]
    assert got.dtype == torch.float8_e4m3fn
    # fp32 sums in another order: the fp8 output differs by at most one fp8 ulp, on few elements
    g, r = got.float(), want.float()
    ulp = torch.where(r.abs() > 0, 2.0 ** (torch.floor(torch.log2(r.abs().clamp(min=2 ** -6))) - 3), 2.0 ** -9)
    assert ((g - r).abs() <= ulp + 1e-12).all()
    assert ((g == r).float().mean()) > 0.95


def test_triton_rejects_what_it_cannot_do_exactly():
    layer = _layer("QuantizedMatMul", x_dtype="int8", x_scale=0.1, w_scale=[0.05], activation="Sigmoid",
                   y_scale=0.02, y_dtype="int8")
    assert "not bit-exact" in triton_int8_gemm.kernel_reason(layer)
    grouped = _layer("QuantizedConv", x_dtype="int8", x_scale=0.1, w_scale=[0.05], group=4)
    assert "grouped" in triton_int8_gemm.kernel_reason(grouped)
    assert "CUDA" in triton_int8_gemm._make("int8").supports(layer, torch.device("cpu"))
    np.testing.assert_equal(ATTRS["residual_first"], 1)


def test_triton_fp8_conv_interpreted():
    """An FP8 convolution through im2col (moved as bytes) and the fp8 kernel, float output: fp8 products are exact
    in float32 and these sums are short, so it equals the reference."""
    x = (torch.randn(1, 8, 5, 5) * 2).to(torch.float8_e4m3fn)
    w = torch.randn(16, 8, 3, 3).to(torch.float8_e4m3fn)
    layer = _layer("QuantizedConv", x_dtype="float8_e4m3fn", x_scale=0.5, w_scale=[0.25] * 16, pads=[1, 1, 1, 1],
                   kernel_shape=[3, 3], activation="Relu")
    want = get_spec("QuantizedConv").reference(x, w, None, **layer.attrs)
    cfg = {"BM": 16, "BN": 16, "BK": 32, "G": 1, "stages": 1, "warps": 1}
    got = triton_int8_gemm.build_kernel(layer, cfg, torch.device("cpu"), interpret=True)([x, w])[0]
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op", ["QuantizedMatMul", "QuantizedConv"])
def test_second_quantized_output(op):
    """Float output plus the next layer's Q as a second output (passes/rules/qdq_dual.py): both tactics give
    both outputs bit-exact to the reference."""
    layer = _case_layer(op, torch.int8, -3, "float32", "Relu", "float", False)
    layer.attrs.update(out2_scale=0.07, out2_zero_point=-4, out2_dtype="int8")
    layer.outputs = ["y", "yq"]
    inputs = _inputs(op, torch.int8, "float", True)
    want = get_spec(op).reference(*inputs, **layer.attrs)
    assert isinstance(want, tuple) and want[1].dtype == torch.int8
    found, _ = candidates(layer, torch.device("cpu"))
    int_mm = next(t for t, _ in found if t.name == "torch_int_mm").build(layer, {}, torch.device("cpu"))
    cfg = {"BM": 32, "BN": 16, "BK": 32, "G": 2, "stages": 1, "warps": 1, "IMPLICIT": 1}
    triton_k = triton_int8_gemm.build_kernel(layer, cfg, torch.device("cpu"), interpret=True)
    kernels = [int_mm, triton_k]
    if op == "QuantizedConv":
        from tensorforge.kernels import quant_float_exact
        kernels.append(quant_float_exact._build(layer, {}, torch.device("cpu")))
    for kernel in kernels:
        got = kernel(inputs)
        assert len(got) == 2
        _compare(got[0], want[0])
        _compare(got[1], want[1])


@pytest.mark.parametrize("op,group,cin,k", [("QuantizedConv", 16, 16, 3), ("QuantizedConv", 1, 40, 3),
                                             ("QuantizedConvTranspose", 1, 8, 3)])
def test_float_exact_conv_is_bit_exact(op, group, cin, k):
    """Depthwise (K = 9: float32), a K = 360 conv (float64 branch) and a transposed conv, all bit-exact."""
    from tensorforge.kernels import quant_float_exact
    x = _q8((2, cin, 7, 7), torch.uint8)
    w = _q8((16, cin // group, k, k)) if op == "QuantizedConv" else _q8((cin, 16, k, k))
    attrs = dict(x_dtype="uint8", x_scale=0.02, x_zero_point=100, w_scale=(torch.rand(16) * 0.01 + 1e-3).tolist(),
                 w_zero_point=[3] * 16, group=group, kernel_shape=[k, k], pads=[1, 1, 1, 1], activation="Relu",
                 y_scale=0.05, y_zero_point=-2, y_dtype="int8")
    if op == "QuantizedConvTranspose":
        attrs.update(strides=[2, 2])
    layer = _layer(op, **attrs)
    b = torch.randn(16) * 0.1
    want = get_spec(op).reference(x, w, b, **layer.attrs)
    got = quant_float_exact._build(layer, {}, torch.device("cpu"))([x, w, b])[0]
    _compare(got, want)
    found, _ = candidates(layer, torch.device("cpu"))
    assert found[0][0].name == ("torch_int_mm" if op == "QuantizedConv" and group == 1 else "float_exact")


@pytest.mark.parametrize("adt,zp,act", [(torch.float32, True, "Relu"), (torch.float16, False, "none")])
def test_triton_w4_interpreted(adt, zp, act):
    """Weight-only blocked int4 GEMM (quant_w4_triton.py) against the BlockQuantizedMatMul reference."""
    from tensorforge.kernels import quant_w4_triton
    k, n, bs = 96, 24, 32
    w = torch.randint(-8, 8, (n, k), dtype=torch.int8).view(torch.int4)
    s = torch.rand(n, k // bs) * 0.05 + 0.01
    z = torch.randint(-2, 3, (n, k // bs), dtype=torch.int8).view(torch.int4) if zp else None
    b = torch.randn(n)
    a = torch.randn(2, 5, k).to(adt)
    layer = Layer("w4", "BlockQuantizedMatMul", ["a", "w", "s", "z", "b"], ["y"],
                  get_spec("BlockQuantizedMatMul").resolve_attrs({"block_size": bs, "activation": act}))
    want = get_spec("BlockQuantizedMatMul").reference(a, w, s, z, b, **layer.attrs)
    cfg = {"BM": 16, "BN": 16, "BK": 32, "G": 1, "stages": 1, "warps": 1}
    got = quant_w4_triton.run_w4(layer, [a, w, s, z, b], cfg, interpret=True)
    tol = 1e-5 if adt == torch.float32 else 2e-2
    torch.testing.assert_close(got.float(), want.float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("xdt,zp", [(torch.int8, 0), (torch.uint8, 77), (torch.int8, -9)])
@pytest.mark.parametrize("cin,bk", [(32, 32), (64, 32)])
def test_triton_implicit_gemm_tap_aligned_addressing(xdt, zp, cin, bk):
    """C a multiple of BK: one tap per K block (TAP_ALIGNED), 1 or 2 blocks per tap; stride 2, dilation 2,
    asymmetric pads, channels-last input; padding reads the zero point (zero fill when it is 0)."""
    x = _q8((2, cin, 9, 8), xdt).contiguous(memory_format=torch.channels_last)
    w = _q8((12, cin, 3, 3))
    layer = _layer("QuantizedConv", x_dtype="uint8" if xdt == torch.uint8 else "int8", x_scale=0.01,
                   x_zero_point=zp, w_scale=(torch.rand(12) * 0.01 + 1e-3).tolist(), activation="Relu",
                   strides=[2, 2], dilations=[2, 2], pads=[2, 1, 0, 2], kernel_shape=[3, 3],
                   y_scale=0.2, y_zero_point=1, y_dtype="int8")
    want = get_spec("QuantizedConv").reference(x, w, **layer.attrs)
    cfg = {"BM": 16, "BN": 16, "BK": bk, "G": 1, "stages": 1, "warps": 1, "IMPLICIT": 1}
    got = triton_int8_gemm.build_kernel(layer, cfg, torch.device("cpu"), interpret=True)([x, w])[0]
    _compare(got, want)
    assert want.float().std() > 0.5          # not a constant output: the check can see a wrong tap


@triton.jit
def _quantize_r_probe(T, S, R, Y, Q, n, zp, lo, hi, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    t, s, r = tl.load(T + offs, mask=m), tl.load(S + offs, mask=m, other=1.0), tl.load(R + offs, mask=m, other=1.0)
    q0 = t * r
    tl.store(Q + offs, tl.fma(tl.fma(-q0, s, t), r, q0), mask=m)      # the quotient alone
    tl.store(Y + offs, quant_math._quantize_r(t, s, r, zp, lo, hi, 1), mask=m)


def test_reciprocal_quantize_is_the_ieee_quotient_near_every_rounding_tie():
    """The GEMM epilogue divides by the output scale from its reciprocal (two FMAs of correction): the quotient
    must be bit-identical to IEEE float32 division (torch's t / s on the CPU), and the quantized value identical to
    the QuantizeLinear reference, on the inputs where it matters — 0..3 ulps either side of every half-integer
    multiple of the scale (the ties of round-half-even), for 300 scales — and on random values over 60 binades."""
    g = torch.Generator().manual_seed(11)
    scales = torch.cat([torch.rand(290, generator=g) * 0.05 + 1e-4,
                        torch.tensor([1.0, 0.5, 0.125, 1 / 3, 0.1, 0.2, 0.3, 7e-3, 2 ** -10, 0.999999])]).float()
    k = torch.arange(-200, 201, dtype=torch.float32) + 0.5
    ties = (k[None, :] * scales[:, None]).float()
    near = [ties]
    up, down = ties.clone(), ties.clone()
    for _ in range(3):
        up, down = torch.nextafter(up, torch.full_like(up, float("inf"))), torch.nextafter(down, -torch.full_like(down, float("inf")))
        near += [up, down]
    t = torch.stack(near).reshape(len(near), *ties.shape)
    s = scales[None, :, None].expand_as(t)
    t, s = t.reshape(-1).contiguous(), s.reshape(-1).contiguous()
    wide = (torch.randn(200000, generator=g) * torch.exp2(torch.randint(-30, 30, (200000,), generator=g).float()))
    sw = (torch.rand(200000, generator=g) * 0.05 + 1e-4)
    t, s = torch.cat([t, wide.float()]), torch.cat([s, sw.float()])
    r = (torch.ones_like(s) / s).float()                        # RN(1/s): IEEE float32 division
    y, q = torch.empty_like(t), torch.empty_like(t)
    n = t.numel()
    _quantize_r_probe[(triton.cdiv(n, 4096),)](t, s, r, y, q, n, 3.0, -128.0, 127.0, BLOCK=4096)
    assert torch.equal(q.view(torch.int32), (t / s).view(torch.int32))
    want = torch.clamp(torch.round((t / s).double()) + 3, -128, 127).float()
    assert torch.equal(y, want)


TMA_CFG = {"BM": 32, "BN": 32, "BK": 32, "G": 2, "stages": 1, "warps": 1, "TMA": 1}
IDS = ["uint8-zp-relu", "int8-qres-mid", "float-out"]


def _uses_tma_store(monkeypatch) -> list:
    """Records, per launch, whether the epilogue's output went in as a tensor descriptor (C_TMA)."""
    seen = []
    real = triton_int8_gemm.tma_output

    def spy(out, cfg):
        d = real(out, cfg)
        seen.append(d is not None)
        return d
    monkeypatch.setattr(triton_int8_gemm, "tma_output", spy)
    return seen


@pytest.mark.parametrize("n, ctma", [(24, 1), (48, 0), (48, 1)], ids=["N24-CTMA-falls-back", "N48", "N48-CTMA"])
@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[2]], ids=IDS)
def test_triton_tma_main_loop_is_bit_exact(case, n, ctma, monkeypatch):
    """TMA=1: A and B as tensor descriptors; K = 48 leaves a half-empty last K block and the N columns a
    half-empty column tile of 32, all read as zeros by the bulk copy (a wrong fill or offset changes integer
    outputs). With CTMA=1, N = 48 int8 outputs (48-byte rows) leave the epilogue by a bulk copy too (C_TMA), whose
    edge tile the copy clips; N = 24 (24-byte rows, which a descriptor cannot take) and float32 outputs fall back
    to pointer stores, as every output does without CTMA."""
    seen = _uses_tma_store(monkeypatch)
    layer = _case_layer(*case, n=n)
    x, w = _q8((3, 7, 48), case[1]), _q8((n, 48))
    r = None if case[5] is None else (_q8((3, 7, n)) if case[5] == "quantized" else torch.randn(3, 7, n))
    inputs = [x, w, torch.randn(n) * 0.2, r]
    want = get_spec(layer.op).reference(*inputs, **layer.attrs)
    cfg = {**TMA_CFG, "CTMA": ctma}
    got = triton_int8_gemm.build_kernel(layer, cfg, torch.device("cpu"), interpret=True)(inputs)[0]
    _compare(got, want)
    assert want.float().std() > 0.1
    assert seen == ([n == 48 and want.element_size() == 1] if ctma else []), seen


@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[2]], ids=IDS)
def test_triton_persistent_loop_is_bit_exact(case, monkeypatch):
    """PERSIST=1: 3 programs walk the 6 output tiles of the (21, 48) output in 8 × 32 tiles (3 row tiles, the
    last one part-empty, × 2 column tiles, the last half-empty), 2 each; a tile skipped, repeated or stored with
    another tile's accumulator, or at another tile's offset by the bulk store, changes integer outputs."""
    from tensorforge.kernels import quant_split
    monkeypatch.setattr(quant_split, "INTERPRETED_SMS", 3)
    seen = _uses_tma_store(monkeypatch)
    layer = _case_layer(*case, n=48)
    x, w = _q8((3, 7, 48), case[1]), _q8((48, 48))
    r = None if case[5] is None else (_q8((3, 7, 48)) if case[5] == "quantized" else torch.randn(3, 7, 48))
    inputs = [x, w, torch.randn(48) * 0.2, r]
    want = get_spec(layer.op).reference(*inputs, **layer.attrs)
    cfg = {"BM": 8, "BN": 32, "BK": 32, "G": 2, "stages": 1, "warps": 1, "TMA": 1, "PERSIST": 1, "CTMA": 1}
    got = triton_int8_gemm.build_kernel(layer, cfg, torch.device("cpu"), interpret=True)(inputs)[0]
    _compare(got, want)
    assert want.float().std() > 0.1
    assert seen == [want.element_size() == 1], seen


def test_triton_tma_needs_16_byte_rows():
    layer = _case_layer(*CASES[2])
    x, w = _q8((3, 7, 40)), _q8((24, 40))
    with pytest.raises(ValueError, match="16-byte row stride"):
        triton_int8_gemm.build_kernel(layer, TMA_CFG, torch.device("cpu"), interpret=True)([x, w, torch.randn(24)])


def _stem(zp):
    """A ResNet-style stem: C = 3 (never a multiple of BK), 7×7 stride 2, pads 3, NCHW input."""
    x = _q8((2, 3, 17, 15), torch.int8)
    w = _q8((16, 3, 7, 7))
    layer = _layer("QuantizedConv", x_dtype="int8", x_scale=0.02, x_zero_point=zp,
                   w_scale=(torch.rand(16) * 0.004 + 1e-3).tolist(), activation="Relu", strides=[2, 2],
                   pads=[3, 3, 3, 3], kernel_shape=[7, 7], y_scale=0.5, y_zero_point=0, y_dtype="int8")
    return layer, [x, w, torch.randn(16) * 0.2]


@pytest.mark.parametrize("zp", [0, -9])
@pytest.mark.parametrize("form", ["implicit-tap-table", "explicit-tma"])
def test_stem_conv_tap_table_and_tma_are_bit_exact(form, zp, monkeypatch):
    layer, inputs = _stem(zp)
    want = get_spec("QuantizedConv").reference(*inputs, **layer.attrs)
    if form == "implicit-tap-table":
        cfg = {"BM": 16, "BN": 16, "BK": 32, "G": 1, "stages": 1, "warps": 1, "IMPLICIT": 1}
    else:      # the Triton im2col (rows padded to 16 bytes, as on CUDA) feeding the TMA GEMM
        monkeypatch.setattr("tensorforge.kernels.quant_gemm.triton_im2col", lambda x: True)
        cfg = {**TMA_CFG, "IMPLICIT": 0}
    got = triton_int8_gemm.build_kernel(layer, cfg, torch.device("cpu"), interpret=True)(inputs)[0]
    _compare(got, want)
    assert want.float().std() > 0.5


def test_a_wrong_tap_table_is_caught(monkeypatch):
    """The check above can fail: the table's column displacement one pixel off changes the stem's outputs."""
    layer, inputs = _stem(-9)
    want = get_spec("QuantizedConv").reference(*inputs, **layer.attrs)
    real = triton_int8_gemm.tap_table

    def shifted(x, geom, k, bk):
        t = real(x, geom, k, bk)
        kp = t.numel() // 3
        t[2 * kp:2 * kp + k] += 1
        return t
    monkeypatch.setattr(triton_int8_gemm, "tap_table", shifted)
    cfg = {"BM": 16, "BN": 16, "BK": 32, "G": 1, "stages": 1, "warps": 1, "IMPLICIT": 1}
    got = triton_int8_gemm.build_kernel(layer, cfg, torch.device("cpu"), interpret=True)(inputs)[0]
    assert not torch.equal(got, want)


SPLIT_FORMS = {   # split-K forms at the interpreter's tile sizes (INTERPRETED_SMS = 8 multiprocessors to fill)
    "pointer": {"BM": 16, "BN": 16, "BK": 16, "G": 1, "stages": 1, "warps": 1, "SPLIT": 1},
    "tma": {"BM": 16, "BN": 16, "BK": 16, "G": 1, "stages": 1, "warps": 1, "TMA": 1, "SPLIT": 1},
}


def _spy_splits(monkeypatch) -> list:
    seen, real = [], triton_int8_gemm.split_plan

    def spy(*a):
        seen.append(real(*a)[0])
        return real(*a)
    monkeypatch.setattr(triton_int8_gemm, "split_plan", spy)
    return seen


@pytest.mark.parametrize("case,form", [(c, f) for c in CASES for f in ("pointer", "tma", "implicit")
                                       if f != "implicit" or c[0] == "QuantizedConv"],
                         ids=lambda v: v if isinstance(v, str) else f"{v[0]}-{v[1]}-{v[3]}-{v[4]}-{v[5]}")
def test_split_k_is_bit_exact(case, form, monkeypatch):
    """Split-K: the partial int32 sums of each K range, summed in the second pass, then the epilogue — bit for bit
    the reference, for every epilogue of CASES; K = 48 (matmul) or 72 (3×3 conv of 8 channels) splits in two
    uneven parts at these tiles, and the spy sees the split happen."""
    layer = _case_layer(*case)
    inputs = _inputs(case[0], case[1], case[5], case[3] == "float32")
    if case[0] == "QuantizedMatMul":       # K = 48: 16-byte rows for the TMA form
        inputs[0], inputs[1] = _q8((3, 7, 48), case[1]), _q8((24, 48))
    elif form == "tma":
        monkeypatch.setattr("tensorforge.kernels.quant_gemm.triton_im2col", lambda x: True)
    want = get_spec(layer.op).reference(*inputs, **layer.attrs)
    cfg = {**SPLIT_FORMS["pointer" if form == "implicit" else form], "IMPLICIT": int(form == "implicit")}
    seen = _spy_splits(monkeypatch)
    got = triton_int8_gemm.build_kernel(layer, cfg, torch.device("cpu"), interpret=True)(inputs)[0]
    assert seen and seen[-1] > 1, seen
    _compare(got, want)


def test_split_k_fp8_within_rounding():
    """fp8 split-K: float32 partials summed in another order than the one-pass kernel: outputs equal the reference
    except where reassociation moved a value across an fp8 rounding boundary (at most one fp8 step)."""
    w = (torch.randn(24, 64) * 2).to(torch.float8_e4m3fn)
    x = (torch.randn(2, 5, 64) * 3).to(torch.float8_e4m3fn)
    layer = _layer("QuantizedMatMul", x_dtype="float8_e4m3fn", x_scale=0.1, w_scale=[0.05], activation="Relu",
                   y_scale=0.25, y_dtype="float8_e4m3fn")
    want = get_spec("QuantizedMatMul").reference(x, w, **layer.attrs).float()
    got = triton_int8_gemm.build_kernel(layer, SPLIT_FORMS["pointer"], torch.device("cpu"),
                                        interpret=True)([x, w])[0].float()
    step = 2.0 ** (torch.floor(torch.log2(want.abs().clamp_min(2.0 ** -6))) - 3)
    assert ((got - want).abs() <= step).all() and (got == want).float().mean() > 0.95


def test_split_k_that_skips_a_k_block_is_caught(monkeypatch):
    """The check above can fail: splits one K block short of covering K change the integer outputs."""
    layer = _case_layer(*CASES[1])
    inputs = _inputs(CASES[1][0], CASES[1][1], CASES[1][5], False)
    inputs[0], inputs[1] = _q8((3, 7, 48), CASES[1][1]), _q8((24, 48))
    want = get_spec(layer.op).reference(*inputs, **layer.attrs)
    real = triton_int8_gemm.split_plan
    monkeypatch.setattr(triton_int8_gemm, "split_plan", lambda m, n, k, cfg, sms: (
        real(m, n, k, cfg, sms)[0], real(m, n, k, cfg, sms)[1] - cfg["BK"]))
    got = triton_int8_gemm.build_kernel(layer, SPLIT_FORMS["pointer"], torch.device("cpu"), interpret=True)(inputs)[0]
    assert not torch.equal(got, want)


def test_split_plan_closed_form():
    cfg = {"BM": 64, "BN": 64, "BK": 128}
    # resnet50 batch 1, layer4 3×3: 49×512 output (8 tiles), K = 4608 (36 blocks) on 132 SMs: ⌈132/8⌉ = 17 → capped
    # at 16 splits → 3 blocks (384 columns) each → 12 non-empty splits
    assert triton_int8_gemm.split_plan(49, 512, 4608, cfg, 132) == (12, 384)
    # BERT-base at 128 tokens, attention output: 2·12 = 24 tiles, K = 768 (6 blocks): ⌈132/24⌉ = 6 → one block each
    assert triton_int8_gemm.split_plan(128, 768, 768, cfg, 132) == (6, 128)
    # batch 32: 100352 rows already fill the GPU; a K of one block cannot split
    assert triton_int8_gemm.split_plan(100352, 256, 64, cfg, 132) == (1, 64)
    assert triton_int8_gemm.split_plan(64, 64, 128, cfg, 132) == (1, 128)


def test_split_configs_are_not_compiled_where_the_grid_is_full():
    layer = _case_layer(*CASES[2])
    cfg = {**SPLIT_FORMS["pointer"], "BM": 64, "BN": 64, "BK": 128}
    small = [_q8((1, 16, 768)), _q8((128, 768))]       # 2 output tiles for the interpreter's 8 "multiprocessors"
    large = [_q8((32, 16, 768)), _q8((128, 768))]      # 16 tiles
    assert triton_int8_gemm.split_fits(layer, cfg, small) is None
    assert "split-K not needed: 16 output tiles" in triton_int8_gemm.split_fits(layer, cfg, large)
    assert triton_int8_gemm.split_fits(layer, {k: v for k, v in cfg.items() if k != "SPLIT"}, large) is None


def test_persistent_configs_are_compiled_only_where_tiles_outnumber_multiprocessors():
    """The interpreter's 8 "multiprocessors": 2 output tiles of 64 × 64 → one tile per program, the plain TMA
    kernel's work, so the persistent config is skipped with a reason; 16 tiles → timed."""
    layer = _case_layer(*CASES[2])
    cfg = {"BM": 64, "BN": 64, "BK": 128, "TMA": 1, "PERSIST": 1}
    small = [_q8((1, 16, 768)), _q8((128, 768))]
    large = [_q8((32, 16, 768)), _q8((128, 768))]
    assert "persistent loop not needed: 2 output tiles for 8 multiprocessors" in triton_int8_gemm.split_fits(
        layer, cfg, small)
    assert triton_int8_gemm.split_fits(layer, cfg, large) is None
    assert all(c in triton_int8_gemm.CONV_CONFIGS and c.get("IMPLICIT") == 0
               for c in triton_int8_gemm.CONV_CONFIGS if c.get("PERSIST"))


def _gelu_epilogue_within(ydt, alpha, cfg, code_fraction):
    """The Triton INT8 GEMM with a GELU epilogue (alpha 0: erf, 1: tanh) under the interpreter against the reference:
    float outputs within 1e-6 of max |y|, int8 codes at most one off on at most `code_fraction` of the elements."""
    layer = _case_layer("QuantizedMatMul", torch.int8, -3, ydt, "Gelu", None, False, n=48)
    layer.attrs["alpha"] = alpha
    inputs = [_q8((3, 7, 48), torch.int8), _q8((48, 48)), torch.randn(48) * 0.2, None]
    want = get_spec(layer.op).reference(*inputs, **layer.attrs)
    cfg = {**cfg, "BM": 32, "BN": 32, "BK": 32, "G": 2, "stages": 1, "warps": 1}
    got = triton_int8_gemm.build_kernel(layer, cfg, torch.device("cpu"), interpret=True)(inputs)[0]
    assert want.float().std() > 0.1
    if ydt == "float32":
        assert float((got - want).abs().max()) <= 1e-6 * float(want.abs().max())
    else:
        off = (got.to(torch.int16) - want.to(torch.int16)).abs()
        assert int(off.max()) <= 1 and float((off > 0).float().mean()) <= code_fraction
    return layer, cfg, inputs


@pytest.mark.parametrize("ydt", ["int8", "float32"])
def test_fast_erf_gelu_epilogue_within_its_declared_slack(ydt):
    """ERF=fast (the GELU epilogue by Abramowitz & Stegun's erf, triton_gemm.gelu_fast) against the exact reference:
    float outputs within 1e-6 of max |y| (the approximation is within 4.7e-7 absolute; a coefficient 1 % off moves GELU
    by ~1e-3), int8 codes at most one off on at most FAST_ERF_CODE_FRACTION of the elements (config_code_slack)."""
    fast = next(c for c in triton_int8_gemm.TMA_CONFIGS if c.get("ERF") == "fast")
    _gelu_epilogue_within(ydt, 0.0, fast, triton_int8_gemm.FAST_ERF_CODE_FRACTION)


def test_fast_erf_configs_fit_gelu_layers_only():
    fast = next(c for c in triton_int8_gemm.TMA_CONFIGS if c.get("ERF") == "fast")
    relu = _case_layer("QuantizedMatMul", torch.int8, -3, "int8", "Relu", None, False, n=48)
    gelu = _case_layer("QuantizedMatMul", torch.int8, -3, "int8", "Gelu", None, False, n=48)
    inputs = [_q8((3, 7, 48)), _q8((48, 48))]
    assert "GELU epilogue" in triton_int8_gemm.config_fits(relu, fast, inputs)
    assert triton_int8_gemm.config_fits(gelu, fast, inputs) is None


@pytest.mark.parametrize("ydt", ["int8", "float32"])
def test_tanh_gelu_epilogue_is_the_tanh_form(ydt):
    """Gelu with alpha = 1 (GPT-2's gelu_new, approximate="tanh") in the Triton INT8 epilogue: float outputs within
    1e-6 of max |y| of the tanh reference (the erf form differs from it by up to ~5e-4, so a kernel computing the
    erf GELU fails), int8 codes at most one off on at most TANH_GELU_CODE_FRACTION of the elements, the slack every
    config declares for this activation (config_code_slack); ERF=fast (an erf) does not fit the layer."""
    frac = triton_int8_gemm.TANH_GELU_CODE_FRACTION
    layer, cfg, inputs = _gelu_epilogue_within(ydt, 1.0, {}, frac)
    assert triton_int8_gemm.config_code_slack(layer, cfg) == ((0,), frac)
    fast = next(c for c in triton_int8_gemm.TMA_CONFIGS if c.get("ERF") == "fast")
    assert "GeluTanh" in triton_int8_gemm.config_fits(layer, fast, inputs)
