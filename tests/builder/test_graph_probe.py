"""The build-time report of layers that keep an engine out of CUDA graphs (builder/graph_probe.py).

Oracles: the ONNX spec (NonZero's output shape depends on the data, so any kernel of it synchronises with the host on
CUDA; Relu, Add, Transpose, GatherND with given indices do not) and, on a GPU, the runtime's own capture attempt
(`ExecutionContext.graph_blockers`, a real CUDA-graph capture). On the CPU the test's detector stands in for torch's
sync debug mode: it reports a layer whose call reaches a data-dependent-shape or host-read torch function."""

import functools

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper
from torch.overrides import TorchFunctionMode

import tensorforge as tfg
from tensorforge.builder import BuilderConfig, builder as builder_module, tactics
from tensorforge.builder.graph_probe import capture_line, cuda_sync_detector
from tensorforge.cli.main import main as cli_main
from tensorforge.runtime import ExecutionContext

from oracle import ort_run

# torch functions whose CUDA kernels synchronise with the host (data-dependent sizes, values read back)
SYNCING = {"nonzero", "argwhere", "unique", "masked_select", "item", "tolist"}


class SyncWatch(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.hit = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in SYNCING and self.hit is None:
            self.hit = f"called {name}"
        return func(*args, **(kwargs or {}))


def watch(call):
    with SyncWatch() as w:
        call()
    return w.hit


def two_nonzero_model() -> bytes:
    """x → Relu → NonZero (nz1); x → Transpose → Add(bias) → NonZero (nz2) → Cast; x → Relu → Relu (y).
    Two layers that must synchronise, with ordinary layers before, between and after them."""
    bias = numpy_helper.from_array(np.full((4, 3), 0.5, np.float32), "bias")
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu_a"),
             helper.make_node("NonZero", ["r"], ["nz1"], name="nz_first"),
             helper.make_node("Transpose", ["x"], ["t"], name="transpose", perm=[1, 0]),
             helper.make_node("Add", ["t", "bias"], ["s"], name="add"),
             helper.make_node("NonZero", ["s"], ["nz"], name="nz_second"),
             helper.make_node("Cast", ["nz"], ["nz2"], name="cast", to=TensorProto.INT32),
             helper.make_node("Relu", ["r"], ["y"], name="relu_b")]
    graph = helper.make_graph(nodes, "syncs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("nz1", TensorProto.INT64, None),
                               helper.make_tensor_value_info("nz2", TensorProto.INT32, None),
                               helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])], [bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def gathernd_model() -> bytes:
    """x → Relu → GatherND(constant indices): no data-dependent shape, no host read (graph-safe since 7f69e8b)."""
    idx = numpy_helper.from_array(np.array([[0, 1], [2, 3], [1, 0]], np.int64), "idx")
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("GatherND", ["r", "idx"], ["y"], name="gather")]
    graph = helper.make_graph(nodes, "gnd", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])], [idx])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


class SameTimer:
    def measure(self, tactic_id, run):
        run()
        return tactics.Measurement([0.01] * 3)


def cpu_build(monkeypatch, model: bytes, detect=watch):
    """A timed CPU build (the network program exists) whose graph check uses `detect` in place of CUDA's."""
    monkeypatch.setattr(builder_module, "choose_tactics", functools.partial(tactics.choose_tactics, timer=SameTimer()))
    monkeypatch.setattr(builder_module, "detector_for", lambda device: detect)
    return tfg.build(model, config=BuilderConfig(device="cpu", optimization_level=1), device="cpu")


def _origins(engine, blockers) -> list[str]:
    by_name = {layer.name: layer for layer in engine.data.layers}
    return [o for b in blockers for o in by_name[b["layer"]].origin]


def _in_engine_order(engine, blockers) -> None:
    order = [layer.name for layer in engine.data.layers]
    names = [b["layer"] for b in blockers]
    assert names == sorted(names, key=order.index), (names, order)


def test_names_every_syncing_layer_and_no_other(monkeypatch):
    """Both NonZero layers are named (the first does not hide the second), in the engine's layer order, and none
    of the Relu/Transpose/Add/Cast layers before, between or after them; the engine still computes the model."""
    engine = cpu_build(monkeypatch, two_nonzero_model())
    info = engine.data.build_info["graph_capture"]
    assert info["checked"] is True and info["point"] == "opt"
    assert [b["op"] for b in info["blockers"]] == ["NonZero", "NonZero"]
    assert sorted(_origins(engine, info["blockers"])) == ["nz_first", "nz_second"]
    _in_engine_order(engine, info["blockers"])
    assert all(b["reason"] == "called nonzero" and b["tactic"] for b in info["blockers"])
    x = np.array([[1, -2, 0, 3], [0, 0, 5, -1], [-4, 2, 0, 0]], np.float32)
    got, want = engine.run({"x": x}), ort_run(two_nonzero_model(), {"x": x})
    for k in want:
        np.testing.assert_array_equal(np.asarray(got[k]), want[k])


def test_a_graph_safe_network_has_no_blockers(monkeypatch):
    engine = cpu_build(monkeypatch, gathernd_model())
    assert engine.data.build_info["graph_capture"] == {"checked": True, "point": "opt", "blockers": []}


def test_cpu_build_says_it_did_not_check():
    engine = tfg.build(two_nonzero_model(), device="cpu")
    info = engine.data.build_info["graph_capture"]
    assert info == {"checked": False, "why": "cpu build: no CUDA graphs"}
    assert "not checked at build (cpu build" in capture_line(info)


def test_a_failing_probe_is_reported_not_fatal(monkeypatch):
    def broken(call):
        raise RuntimeError("probe exploded")
    engine = cpu_build(monkeypatch, gathernd_model(), detect=broken)
    info = engine.data.build_info["graph_capture"]
    assert info["checked"] is False and "probe exploded" in info["why"]


def test_build_log_inspect_and_engine_file_carry_the_blockers(monkeypatch, tmp_path, capsys, caplog):
    """The warning names each layer; the saved engine keeps the report (schema-checked) and `inspect` prints it."""
    engine = cpu_build(monkeypatch, two_nonzero_model())
    path = tmp_path / "e.engine"
    engine.save(str(path))
    assert tfg.load(str(path)).data.build_info["graph_capture"] == engine.data.build_info["graph_capture"]
    assert cli_main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    names = [b["layer"] for b in engine.data.build_info["graph_capture"]["blockers"]]
    assert "CUDA graphs: blocked by 2 layer(s) that synchronise with the host" in out
    assert all(f"layer {n} (NonZero" in out for n in names)


def test_a_tampered_report_fails_to_load(monkeypatch, tmp_path):
    """The report is data read by inspect: a blocker whose layer is not a string fails the schema, cleanly."""
    from tensorforge.engine import serialize
    engine = cpu_build(monkeypatch, gathernd_model())
    engine.data.build_info["graph_capture"] = {"checked": True, "blockers": [{"layer": 3, "op": "X", "tactic": "t",
                                                                               "reason": "r"}]}
    path = tmp_path / "bad.engine"
    engine.save(str(path))
    with pytest.raises(tfg.TensorforgeError, match="graph_capture"):
        serialize.from_bytes(path.read_bytes(), "engine file bad.engine")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (sync debug mode, graph capture)")
@pytest.mark.parametrize("model, blocked", [(two_nonzero_model, ["nz_first", "nz_second"]), (gathernd_model, [])])
def test_cuda_build_report_agrees_with_the_runtime_capture(model, blocked):
    """On a GPU, the build's report (torch's sync debug mode, layer by layer) names the layers the ONNX spec says
    must synchronise, and the runtime's real capture attempt agrees: it runs uncaptured, naming the first of them,
    exactly when the build said so."""
    engine = tfg.build(model(), device="cuda")
    info = engine.data.build_info["graph_capture"]
    assert info["checked"] is True, info
    assert sorted(_origins(engine, info["blockers"])) == blocked             # the layers the spec says, no other
    _in_engine_order(engine, info["blockers"])      # the H100 build ordered nz_second's layer before nz_first's
    ctx = ExecutionContext(engine.data, "cuda")
    x = np.array([[1, -2, 0, 3], [0, 0, 5, -1], [-4, 2, 0, 0]], np.float32)
    for _ in range(3):                              # first sight of the shape: warm-up check, then capture
        got = ctx.run({"x": torch.from_numpy(x).cuda()})
    want = ort_run(model(), {"x": x})
    for k in want:
        np.testing.assert_array_equal(got[k].cpu().numpy(), want[k])
    runtime = [b["layer"] for b in ctx.graph_blockers]
    assert (runtime[:1] == [info["blockers"][0]["layer"]]) if blocked else (runtime == [] and ctx.graphs_enabled)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_sync_detector_sees_a_host_read_and_not_a_kernel():
    x = torch.ones(8, device="cuda")
    assert cuda_sync_detector(lambda: x.sum().item()) is not None
    assert cuda_sync_detector(lambda: (x * 2).relu()) is None
    assert torch.cuda.get_sync_debug_mode() == 0
