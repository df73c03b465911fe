"""cpu_dnnl: convolutions as oneDNN primitives made once per input shape through its C library (issue 18), against
the Conv/FusedConv/FusedConvPool references in float64 and onnxruntime; every epilogue as post-ops (PRelu, the
residual before or after the activation) and the broadcast cases torch finishes; the primitive and packed-weight
lifetimes (one primitive per shape, weights packed once per engine and layout); the refusal when the library is
missing; model-level checks that fail on a 1 % weight error and on a swapped activation."""

import numpy as np
import pytest
import torch

import tensorforge as tfg
from oracle import ort_run
from tensorforge.engine import from_bytes
from tensorforge.ir import Layer, get_spec
from tensorforge.kernels import cpu_dnnl_conv as dc
from tensorforge.kernels import onednn_capi
from tensorforge.runtime import ExecutionContext

from kernels.test_cpu_conv_onednn import (ACTS, GEOMETRIES, _attrs, _mbconv_model, check_fused_epilogue,
                                          check_packed_once_per_engine)

CPU = torch.device("cpu")
pytestmark = pytest.mark.skipif(onednn_capi.library() is None, reason=str(onednn_capi.unavailable_reason()))


def _layer(op, n_in, outs=("o",), **attrs):
    return Layer("l", op, [f"i{k}" for k in range(n_in)], list(outs), attrs)


def _double(inputs):
    return [t.double() if t is not None else None for t in inputs]


@pytest.mark.parametrize("geom", GEOMETRIES)
@pytest.mark.parametrize("batch", [1, 3])
def test_conv_matches_the_reference(geom, batch):
    cin, cout, k, strides, dil, group, pads = geom
    x, w, b = torch.randn(batch, cin, 19, 17), torch.randn(cout, cin // group, k, k), torch.randn(cout)
    attrs = _attrs(k, strides, dil, group, pads)
    run = dc.ConvDnnl.build(_layer("Conv", 3, **attrs), {}, CPU)
    got = run([x, w, b])[0]
    want = get_spec("Conv").reference(x.double(), w.double(), b.double(), **attrs)
    assert got.shape == want.shape and got.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)
    no_bias = run([x, w])[0]                                        # another primitive (no bias operand)
    torch.testing.assert_close(no_bias.double(), want - b.double().reshape(1, -1, 1, 1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("act,alpha,beta", ACTS + [("Gelu", 1.0, 0.0)])
@pytest.mark.parametrize("residual", [None, "first", "after", "broadcast"])
def test_fused_conv_epilogue_matches_the_reference(act, alpha, beta, residual):
    check_fused_epilogue(dc.FusedConvDnnl, act, alpha, beta, residual)


@pytest.mark.parametrize("slope_shape", [(1,), (16, 1, 1)])
def test_prelu_slope_one_or_per_channel(slope_shape):
    """One slope (mask 0) and a per-channel slope (mask on dim 1) ride as the prelu post-op (the fusion rule gives
    FusedConv no other slope shapes: passes/rules/epilogue.py)."""
    x, w = torch.randn(1, 8, 12, 12), torch.randn(16, 8, 1, 1)
    slope = torch.rand(*slope_shape) - 0.5
    attrs = dict(kernel_shape=[1, 1], activation="PRelu")
    inputs = [x, w, None, None, slope]
    got = dc.FusedConvDnnl.build(_layer("FusedConv", 5, **attrs), {}, CPU)(inputs)[0]
    want = get_spec("FusedConv").reference(*_double(inputs), **attrs)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


def test_fused_conv_pool_matches_the_reference():
    x, w, b = torch.randn(1, 24, 14, 14), torch.randn(24, 1, 5, 5), torch.randn(24)
    attrs = dict(kernel_shape=[5, 5], pads=[2, 2, 2, 2], group=24, activation="HardSwish")
    for outs in (("y", "p"), ("", "p")):
        got = dc.FusedConvPoolDnnl.build(_layer("FusedConvPool", 3, outs, **attrs), {}, CPU)([x, w, b])
        y, p = get_spec("FusedConvPool").reference(x.double(), w.double(), b.double(), **attrs)
        torch.testing.assert_close(got[1].double(), p, rtol=1e-5, atol=1e-5)
        if outs[0]:
            torch.testing.assert_close(got[0].double(), y, rtol=1e-5, atol=1e-5)
        else:
            assert got[0] is None


def test_one_primitive_per_shape_and_weights_packed_once_per_layout():
    layer = _layer("FusedConv", 3, kernel_shape=[3, 3], pads=[1, 1, 1, 1], activation="Relu")
    w, b = torch.randn(16, 8, 3, 3), torch.randn(16)
    runner = dc.ConvRunner(layer, "Relu")
    start = onednn_capi.PACK_COUNT[0]
    for _ in range(3):
        runner(torch.randn(1, 8, 10, 10), w, b)
    assert len(runner.prims) == 1 and onednn_capi.PACK_COUNT[0] - start == 1
    runner(torch.randn(2, 8, 10, 10), w, b)                          # another shape: another primitive
    assert len(runner.prims) == 2
    again = dc.ConvRunner(layer, "Relu")                             # another context of the same engine
    again(torch.randn(1, 8, 10, 10), w, b)
    assert onednn_capi.PACK_COUNT[0] - start <= 2                              # same layout: no new reorder


def test_refusals_say_why(monkeypatch):
    conv = _layer("Conv", 2, kernel_shape=[3, 3])
    assert "CPU tactic" in dc.ConvDnnl.supports(conv, torch.device("cuda"))
    assert "2-D" in dc.ConvDnnl.supports(_layer("Conv", 2, kernel_shape=[3]), CPU)
    half = _layer("Conv", 2, kernel_shape=[3, 3])
    half.precision = "float16"
    assert "float16" in dc.ConvDnnl.supports(half, CPU)
    with pytest.raises(ValueError, match="does not take"):
        dc.ConvDnnl.build(_layer("Conv", 2), {}, CPU)([torch.randn(1, 3, 9), torch.randn(4, 3, 3)])
    monkeypatch.setattr(onednn_capi, "_LIB", ["oneDNN's C library is not installed (pip install x)"])
    assert "pip install" in dc.ConvDnnl.supports(conv, CPU)
    engine = tfg.build(_mbconv_model(1), device="cpu")          # without the library: the torch-op tactic, and why
    assert all(not la.tactic.endswith("cpu_dnnl") for la in engine.data.layers)


def test_a_missing_library_path_is_reported(monkeypatch, tmp_path):
    monkeypatch.setenv("TENSORFORGE_ONEDNN_LIB", str(tmp_path / "libdnnl.so.3"))
    why = onednn_capi._load()
    assert isinstance(why, str) and "cannot be used" in why and "libdnnl.so.3" in why


# ---- through the builder: chosen untimed, matches onnxruntime, and the checks can fail ------------------------

@pytest.mark.parametrize("batch", [1, 4])
def test_model_chooses_it_and_matches_onnxruntime(batch):
    model = _mbconv_model(batch)
    x = np.random.default_rng(1).standard_normal((batch, 16, 28, 28)).astype(np.float32)
    engine = tfg.build(model, device="cpu")
    convs = [la for la in engine.data.layers if la.op in ("Conv", "FusedConv", "FusedConvPool")]
    assert convs and all(la.tactic.endswith("cpu_dnnl") for la in convs), [la.tactic for la in convs]
    want = ort_run(model, {"x": x})["y"]
    np.testing.assert_allclose(np.asarray(engine.run({"x": x})["y"]), want, rtol=1e-4, atol=1e-5)
    # the check can fail: one convolution's weights 1 % off, or its activation swapped, is caught
    for breakage in ("weight", "activation"):
        broken = from_bytes(engine.serialize())
        la = next(la for la in broken.layers if la.attrs.get("activation") == "HardSwish")
        if breakage == "weight":
            broken.constants[la.inputs[1]] = broken.constants[la.inputs[1]] * 1.01
        else:
            la.attrs["activation"] = "Relu"
        bad = ExecutionContext(broken, "cpu").run({"x": torch.from_numpy(x)})["y"].numpy()
        assert not np.allclose(bad, want, rtol=1e-4, atol=1e-5), breakage


def test_weights_packed_once_per_engine():
    check_packed_once_per_engine(tfg.build(_mbconv_model(1), device="cpu").serialize(), "cpu_dnnl",
                                 onednn_capi.PACK_COUNT)


def test_a_primitive_per_thread_count():
    """oneDNN sizes a primitive's thread team when it is made, so a call under another intra-op thread count
    (a context's --threads, torch_rnn's one-thread rule) gets its own primitive, made under that count; the
    result is the same."""
    from tensorforge.util.cpu_threads import cpu_threads
    layer = _layer("FusedConv", 3, kernel_shape=[3, 3], pads=[1, 1, 1, 1], activation="Relu")
    x, w, b = torch.randn(1, 8, 10, 10), torch.randn(16, 8, 3, 3), torch.randn(16)
    runner = dc.ConvRunner(layer, "Relu")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        two = runner(x, w, b)
        with cpu_threads(1):
            one = runner(x, w, b)
        assert sorted(key[-1] for key in runner.prims) == [1, 2]
    finally:
        torch.set_num_threads(before)
    torch.testing.assert_close(one, two, rtol=1e-6, atol=1e-6)


def test_one_openmp_runtime_in_the_process():
    """The library binds the libgomp.so.1 torch loaded (so torch.set_num_threads sets its thread count too), not a
    second OpenMP runtime whose pool would compete with torch's for the cores."""
    maps = open("/proc/self/maps").read()
    gomps = {line.split()[-1] for line in maps.splitlines() if line.split()[-1].endswith(("libgomp.so.1", ".so"))
             and "libgomp" in line.split()[-1]}
    assert len(gomps) == 1, gomps
    assert "libiomp5" not in maps
