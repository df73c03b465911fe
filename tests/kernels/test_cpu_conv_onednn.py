"""cpu_onednn_nhwc: channels-last oneDNN convolution (torch's per-call ops) with packed weights and fused epilogue
(issue 18; the untimed first fit only where oneDNN's C library is missing: cpu_dnnl is preferred), against the
Conv/FusedConv/FusedConvPool references and onnxruntime; the packed-weight lifetime (once per engine: two contexts
share, a second load packs again); refusal reasons; the layout it hands its consumers."""

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from oracle import ort_run
from tensorforge.engine import from_bytes, to_bytes
from tensorforge.ir import Layer, get_spec
from tensorforge.kernels import cpu_conv_onednn as cc
from tensorforge.runtime import ExecutionContext

CPU = torch.device("cpu")


def _layer(op, n_in, outs=("o",), **attrs):
    return Layer("l", op, [f"i{k}" for k in range(n_in)], list(outs), attrs)


GEOMETRIES = [  # (cin, cout, k, strides, dilations, group, pads / auto_pad)
    (16, 64, 1, [1, 1], [1, 1], 1, [0, 0, 0, 0]),
    (24, 24, 3, [2, 2], [1, 1], 24, [1, 1, 1, 1]),          # depthwise, strided
    (12, 18, 3, [1, 2], [2, 1], 3, [2, 1, 2, 1]),            # grouped, dilated, anisotropic
    (8, 8, 5, [2, 2], [1, 1], 8, [1, 2, 2, 1]),              # asymmetric pads: one padded copy first
    (6, 10, 3, [2, 2], [1, 1], 1, "SAME_UPPER"),
]


def _attrs(k, strides, dil, group, pads):
    a = dict(kernel_shape=[k, k], strides=strides, dilations=dil, group=group)
    if isinstance(pads, str):
        a["auto_pad"] = pads
    else:
        a["pads"] = pads
    return a


@pytest.mark.parametrize("geom", GEOMETRIES)
@pytest.mark.parametrize("batch", [1, 3])
def test_conv_matches_the_reference(geom, batch):
    cin, cout, k, strides, dil, group, pads = geom
    x, w, b = torch.randn(batch, cin, 19, 17), torch.randn(cout, cin // group, k, k), torch.randn(cout)
    attrs = _attrs(k, strides, dil, group, pads)
    got = cc.ConvOneDnn.build(_layer("Conv", 3, **attrs), {}, CPU)([x, w, b])[0]
    want = get_spec("Conv").reference(x.double(), w.double(), b.double(), **attrs)
    assert got.shape == want.shape and got.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


ACTS = [("none", 0.0, 0.0), ("Relu", 0.0, 0.0), ("HardSwish", 0.0, 0.0), ("HardSigmoid", 1 / 6, 0.5),
        ("HardSigmoid", 0.2, 0.5), ("Clip", -1.0, 2.0), ("LeakyRelu", 0.1, 0.0), ("Sigmoid", 0.0, 0.0),
        ("Tanh", 0.0, 0.0), ("Silu", 0.0, 0.0), ("Gelu", 0.0, 0.0), ("Elu", 1.0, 0.0), ("PRelu", 0.0, 0.0)]


def check_fused_epilogue(tactic_cls, act, alpha, beta, residual):
    """A FusedConv tactic against the float64 reference with this activation and residual placement ("first":
    added before the activation, "after", "broadcast": a residual that only broadcasts to y)."""
    x, w, b = torch.randn(2, 8, 12, 12), torch.randn(16, 8, 3, 3) * 0.3, torch.randn(16)
    inputs = [x, w, b]
    attrs = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], activation=act, alpha=alpha, beta=beta,
                 residual_first=int(residual == "first"))
    if residual is not None:
        inputs.append(torch.randn(1, 16, 1, 12) if residual == "broadcast" else torch.randn(2, 16, 12, 12))
    if act == "PRelu":
        inputs += [None] * (4 - len(inputs)) + [torch.rand(16) - 0.5]
    got = tactic_cls.build(_layer("FusedConv", len(inputs), **attrs), {}, CPU)(list(inputs))[0]
    want = get_spec("FusedConv").reference(*[t.double() if t is not None else None for t in inputs], **attrs)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("act,alpha,beta", ACTS)
@pytest.mark.parametrize("residual", [None, "first", "after", "broadcast"])
def test_fused_conv_epilogue_matches_the_reference(act, alpha, beta, residual):
    check_fused_epilogue(cc.FusedConvOneDnn, act, alpha, beta, residual)


def test_fused_conv_pool_matches_the_reference():
    x, w, b = torch.randn(1, 24, 14, 14), torch.randn(24, 1, 5, 5), torch.randn(24)
    attrs = dict(kernel_shape=[5, 5], pads=[2, 2, 2, 2], group=24, activation="HardSwish")
    for outs in (("y", "p"), ("", "p")):
        got = cc.FusedConvPoolOneDnn.build(_layer("FusedConvPool", 3, outs, **attrs), {}, CPU)([x, w, b])
        y, p = get_spec("FusedConvPool").reference(x, w, b, **attrs)
        torch.testing.assert_close(got[1], p, rtol=1e-5, atol=1e-5)
        if outs[0]:
            torch.testing.assert_close(got[0], y, rtol=1e-5, atol=1e-5)
        else:
            assert got[0] is None


def test_refusals_say_why():
    assert "CPU tactic" in cc.ConvOneDnn.supports(_layer("Conv", 2, kernel_shape=[3, 3]), torch.device("cuda"))
    assert "2-D" in cc.ConvOneDnn.supports(_layer("Conv", 2, kernel_shape=[3]), CPU)
    assert "4-D" in cc.ConvOneDnn.fits(_layer("Conv", 2), {}, [torch.randn(1, 3, 9), torch.randn(4, 3, 3)])
    why = cc.ConvOneDnn.fits(_layer("Conv", 2), {}, [torch.randn(1, 3, 9, 9).half(), torch.randn(4, 3, 3, 3).half()])
    assert "float32" in why
    with pytest.raises(ValueError, match="does not take"):
        cc.ConvOneDnn.build(_layer("Conv", 2), {}, CPU)([torch.randn(1, 3, 9), torch.randn(4, 3, 3)])


# ---- through the builder: chosen untimed, matches onnxruntime, weights packed once per engine ---------------

def _mbconv_model(batch=1):
    """Conv-HardSwish → depthwise Conv-Relu → SE (GlobalAveragePool, 1×1 Conv-Relu, 1×1 Conv-HardSigmoid, Mul) →
    1×1 projection + residual: MobileNetV3's block, written in ONNX."""
    rng = np.random.default_rng(0)

    def t(name, *shape, s=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * s).astype(np.float32), name)
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], kernel_shape=[1, 1]),
             helper.make_node("HardSwish", ["c0"], ["a0"]),
             helper.make_node("Conv", ["a0", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=32),
             helper.make_node("Relu", ["c1"], ["a1"]),
             helper.make_node("GlobalAveragePool", ["a1"], ["g"]),
             helper.make_node("Conv", ["g", "w2", "b2"], ["s0"], kernel_shape=[1, 1]),
             helper.make_node("Relu", ["s0"], ["s1"]),
             helper.make_node("Conv", ["s1", "w3", "b3"], ["s2"], kernel_shape=[1, 1]),
             helper.make_node("HardSigmoid", ["s2"], ["s3"], alpha=1 / 6, beta=0.5),
             helper.make_node("Mul", ["a1", "s3"], ["m"]),
             helper.make_node("Conv", ["m", "w4", "b4"], ["c4"], kernel_shape=[1, 1]),
             helper.make_node("Add", ["c4", "x"], ["y"])]
    inits = [t("w0", 32, 16, 1, 1), t("b0", 32), t("w1", 32, 1, 3, 3), t("b1", 32), t("w2", 8, 32, 1, 1), t("b2", 8),
             t("w3", 32, 8, 1, 1), t("b3", 32), t("w4", 16, 32, 1, 1), t("b4", 16)]
    g = helper.make_graph(nodes, "mbconv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 16, 28, 28])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def _on_torch_ops(data: bytes):
    """The engine with its convolutions on this tactic: the untimed first fit is cpu_dnnl (oneDNN's C library,
    kernels/cpu_dnnl_conv.py) when that is installed, cpu_onednn_nhwc otherwise; the tactic id is data."""
    engine = from_bytes(data)
    for la in engine.layers:
        if la.op in ("Conv", "FusedConv", "FusedConvPool", "GatedConv"):   # GatedConv: the gate Mul, then the conv
            assert la.tactic.endswith(("cpu_dnnl", "cpu_onednn_nhwc")), la.tactic
            la.tactic = la.tactic.split(".", 1)[0] + (".mul_" if la.op == "GatedConv" else ".") + "cpu_onednn_nhwc"
    return engine


@pytest.mark.parametrize("batch", [1, 4])
def test_model_on_it_matches_onnxruntime(batch):
    model = _mbconv_model(batch)
    x = np.random.default_rng(1).standard_normal((batch, 16, 28, 28)).astype(np.float32)
    engine = _on_torch_ops(tfg.build(model, device="cpu").serialize())
    want = ort_run(model, {"x": x})["y"]
    got = ExecutionContext(engine, "cpu").run({"x": torch.from_numpy(x)})["y"].numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # the check can fail: the same engine with one convolution's activation swapped is caught
    broken = from_bytes(to_bytes(engine))
    la = next(la for la in broken.layers if la.attrs.get("activation") == "HardSwish")
    la.attrs["activation"] = "Relu"
    bad = ExecutionContext(broken, "cpu").run({"x": torch.from_numpy(x)})["y"].numpy()
    assert not np.allclose(bad, want, rtol=1e-3, atol=1e-4)


def check_packed_once_per_engine(data: bytes, suffix: str, counter: list):
    """Two contexts of one engine share the packed weights; the same file loaded again is another engine and packs
    its own; a second call packs nothing. `counter`: the tactic's reorder count, `suffix`: its tactic id's end."""
    feed = {"x": torch.randn(1, 16, 28, 28)}
    engine = from_bytes(data)
    n_conv = sum(1 + (la.op == "TwoLayerMLP") for la in engine.layers if la.tactic.endswith(suffix))  # 2 weights
    start = counter[0]
    a, b = ExecutionContext(engine, "cpu"), ExecutionContext(engine, "cpu")
    ya = a.run(feed)["y"]
    assert counter[0] - start == n_conv
    yb = b.run(feed)["y"]
    a.run(feed)
    assert counter[0] - start == n_conv                  # the second context and the second call reuse them
    torch.testing.assert_close(ya, yb, rtol=0, atol=0)
    ExecutionContext(from_bytes(data), "cpu").run(feed)
    assert counter[0] - start == 2 * n_conv              # another loaded engine: its own weights, packed once


def test_weights_packed_once_per_engine():
    data = to_bytes(_on_torch_ops(tfg.build(_mbconv_model(1), device="cpu").serialize()))
    check_packed_once_per_engine(data, "cpu_onednn_nhwc", cc.PACK_COUNT)


def test_consumers_get_channels_last_and_a_chain_converts_once():
    """The first convolution converts x to NHWC; its output reaches the next one already NHWC (no copy)."""
    x, w = torch.randn(1, 8, 10, 10), torch.randn(8, 8, 3, 3)
    conv = cc.ConvOneDnn.build(_layer("Conv", 2, kernel_shape=[3, 3], pads=[1, 1, 1, 1]), {}, CPU)
    y = conv([x, w])[0]
    assert y.is_contiguous(memory_format=torch.channels_last) and not y.is_contiguous()
    assert y.contiguous(memory_format=torch.channels_last).data_ptr() == y.data_ptr()
    z = conv([y, w])[0]
    want = get_spec("Conv").reference(get_spec("Conv").reference(x, w, pads=[1, 1, 1, 1]), w, pads=[1, 1, 1, 1])
    torch.testing.assert_close(z, want, rtol=1e-4, atol=1e-4)


def test_engine_outputs_are_dense():
    """The model's last layer is a channels-last convolution; the engine still returns a row-major output."""
    data = _on_torch_ops(tfg.build(_mbconv_model(2), device="cpu").serialize())
    assert data.layers[-1].tactic.endswith("cpu_onednn_nhwc")
    y = ExecutionContext(data, "cpu").run({"x": torch.randn(2, 16, 28, 28)})["y"]
    assert y.is_contiguous() and y.shape == (2, 16, 28, 28)
