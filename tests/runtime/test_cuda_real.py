"""The same runtime and builder features on a real GPU (skipped where CUDA is absent, i.e. in CI): timed tactic
choice and the warm timing cache, CUDA-graph capture and replay per shape, an uncapturable engine, several streams,
the per-layer profiler with CUDA events, and --noTF32."""

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from tensorforge.runtime import ExecutionContext
from tensorforge.runtime.profiler import profile_layers
from tensorforge.runtime.streams import StreamGroup
from tensorforge.util import log as tflog
from tensorforge.util.errors import UsageError

from oracle import ort_run

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
SHAPES = {"x": ((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16))}


def conv_net() -> bytes:
    """conv → relu → conv (+ residual) → global pool → gemm, batch dynamic."""
    rng = np.random.default_rng(0)
    w = lambda *s: numpy_helper.from_array((rng.standard_normal(s) * 0.2).astype(np.float32))  # noqa: E731
    inits = [w(8, 3, 3, 3), w(8), w(8, 8, 3, 3), w(8), w(10, 8), w(10)]
    for t, n in zip(inits, ["w1", "b1", "w2", "b2", "wf", "bf"]):
        t.name = n
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
             helper.make_node("Add", ["c2", "r1"], ["s"], name="residual"),
             helper.make_node("GlobalAveragePool", ["s"], ["p"], name="pool"),
             helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1, name="fc")]
    graph = helper.make_graph(nodes, "convnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def test_timed_build_graph_replay_and_warm_cache(tmp_path):
    path = str(tmp_path / "cache.json")
    cold = tfg.build(conv_net(), device="cuda", shapes=SHAPES, tf32=False, timing_cache=path)
    stats = cold.data.build_info["tactics"]
    assert stats["timed_layers"] >= 2 and stats["measurements"] >= 4          # both convs had 2 candidates
    warm = tfg.build(conv_net(), device="cuda", shapes=SHAPES, tf32=False, timing_cache=path)
    assert warm.data.build_info["tactics"]["measurements"] == 0
    assert [layer.tactic for layer in warm.data.layers] == [layer.tactic for layer in cold.data.layers]
    ctx = ExecutionContext(cold.data, "cuda")
    assert ctx.graphs_enabled
    for b in (2, 3, 2, 4):
        x = np.random.default_rng(b).standard_normal((b, 3, 16, 16)).astype(np.float32)
        got = ctx.run({"x": torch.from_numpy(x).cuda()})["y"].cpu().numpy()
        np.testing.assert_allclose(got, ort_run(conv_net(), {"x": x})["y"], rtol=1e-3, atol=1e-4)
    assert ctx.graph_cache.captures == 3 and ctx.graph_disabled_reason is None


def test_fp16_engine_close_to_fp32():
    engine = tfg.build(conv_net(), device="cuda", shapes=SHAPES, fp16=True)
    x = np.random.default_rng(7).standard_normal((4, 3, 16, 16)).astype(np.float32)
    got = engine.run({"x": x})["y"]
    want = ort_run(conv_net(), {"x": x})["y"]
    assert got.dtype == np.float32
    assert np.abs(got - want).max() <= 2e-2 * np.abs(want).max()


def nonzero_net() -> bytes:
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("NonZero", ["r"], ["y"], name="nz")]
    graph = helper.make_graph(nodes, "nz", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def test_data_dependent_engine_is_not_captured(monkeypatch, capsys):
    data = tfg.build(nonzero_net(), device="cuda").data
    monkeypatch.setattr(tflog.get_logger(), "min_severity", tflog.Severity.WARNING)
    ctx = ExecutionContext(data, "cuda")
    x = torch.tensor([1.0, -1, 2, 0, 3, -2, 0, 5], device="cuda")
    assert ctx.run({"x": x})["y"].cpu().tolist() == [[0, 2, 4, 7]]
    assert not ctx.graphs_enabled and "runs without CUDA graphs" in capsys.readouterr().err
    strict = ExecutionContext(data, "cuda", use_cuda_graph=True)
    with pytest.raises(UsageError, match="cannot run in a CUDA graph"):
        strict.run({"x": x})


def test_streams_and_profile():
    data = tfg.build(conv_net(), device="cuda", shapes=SHAPES, tf32=False).data
    group = StreamGroup(data, 2, "cuda")
    feeds = [{"x": torch.randn(b, 3, 16, 16, device="cuda")} for b in (1, 2, 3, 4)]
    ref = ExecutionContext(data, "cuda", use_cuda_graph=False)
    for feed, out in zip(feeds, group.run_all(feeds)):
        torch.testing.assert_close(out["y"], ref.run(feed)["y"], rtol=1e-4, atol=1e-5)
    prof = profile_layers(ref, feeds[1], iterations=5)
    rows = prof.to_json()
    assert rows[0] == {"count": 5} and len(rows) == len(data.layers) + 1
    assert all(r["averageMs"] >= 0 for r in rows[1:])


def test_no_tf32_flags_during_run_and_restored():
    strict = tfg.build(conv_net(), device="cuda", shapes=SHAPES, tf32=False).data
    ctx = ExecutionContext(strict, "cuda", use_cuda_graph=False)
    seen = []
    real = ctx._program[0][1]

    def spy(inputs):
        seen.append((torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32))
        return real(inputs)
    ctx._program[0] = ctx._program[0][:1] + (spy,) + ctx._program[0][2:]
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    ctx.run({"x": torch.randn(2, 3, 16, 16, device="cuda")})
    assert seen == [(False, False)]
    assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_conv_tactics_match_the_reference_on_gpu(dtype):
    from tensorforge.ir import Layer, get_spec
    from tensorforge.kernels.conv_channels_last import FusedConvChannelsLast
    from tensorforge.kernels.conv_cudnn_fused import FusedConvCudnnRelu
    torch.backends.cudnn.allow_tf32 = False
    attrs = {"pads": [1, 1, 1, 1], "strides": [1, 1], "activation": "Relu", "residual_first": 1}
    layer = Layer("c", "FusedConv", ["x", "w", "b", "r"], ["y"], attrs)
    dev = torch.device("cuda")
    x, w = torch.randn(2, 16, 12, 12, device=dev, dtype=dtype), torch.randn(32, 16, 3, 3, device=dev, dtype=dtype) * 0.1
    b, r = torch.randn(32, device=dev, dtype=dtype), torch.randn(2, 32, 12, 12, device=dev, dtype=dtype)
    want = get_spec("FusedConv").reference(x.float(), w.float(), b.float(), r.float(), **attrs)
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    for tac, cfg in [(FusedConvChannelsLast, {}), (FusedConvCudnnRelu, {"layout": "nchw"}),
                     (FusedConvCudnnRelu, {"layout": "nhwc"})]:
        (y,) = tac.build(layer, cfg, dev)([x, w, b, r])
        torch.testing.assert_close(y.float(), want, rtol=tol, atol=tol)
        (y,) = tac.build(Layer("c", "FusedConv", ["x", "w", "b"], ["y"], attrs), cfg, dev)([x, w, b])
        torch.testing.assert_close(y.float(), torch.relu(get_spec("Conv").reference(x.float(), w.float(), b.float(),
                                                                                   pads=[1, 1, 1, 1])), rtol=tol, atol=tol)
