"""Per-point tactics of a range profile (issue 15.5): the builder times min and max as well as opt, records the
layers whose winner differs there, the engine file keeps them as data, and the runtime runs the kernels of the
point nearest the call's shapes. Oracles: a fake timer whose winner depends on the row count (so the right choice
is known in closed form), the nearest-point rule worked by hand, onnxruntime for every output."""

import functools

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper

import tensorforge as tfg
from tensorforge.builder import BuilderConfig, builder as builder_module, tactics
from tensorforge.engine import from_bytes, to_bytes
from tensorforge.kernels import registry
from tensorforge.kernels.registry import Tactic
from tensorforge.runtime import ExecutionContext
from tensorforge.runtime.point_select import nearest_point
from tensorforge.util.errors import EngineFileError, TensorforgeError

from engine_craft import edit
from oracle import ort_run

SHAPES = {"x": ((1, 8), (4, 8), (16, 8))}
RAN: list[str] = []


def two_relus() -> bytes:
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r1"), helper.make_node("Neg", ["a"], ["b"], name="neg"),
             helper.make_node("Relu", ["b"], ["y"], name="r2")]
    graph = helper.make_graph(nodes, "relus", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _relu(name):
    def build(layer, cfg, device):
        def run(inputs):
            RAN.append(name)
            return [torch.clamp(inputs[0], min=0)]
        return run
    return Tactic("Relu", name, lambda layer, device: None, build, [{}], 0)


class RowTimer:
    """'small' wins at ≤ 2 rows, 'big' above; the reference is never fastest."""

    def measure(self, tactic_id, run):
        rows = run()[0].shape[0]
        name = tactic_id.split(".", 1)[1].split("[")[0]
        ms = {"small": 0.1 if rows <= 2 else 0.5, "big": 0.5 if rows <= 2 else 0.1}.get(name, 0.3)
        return tactics.Measurement([ms] * 3)


@pytest.fixture
def engine(monkeypatch):
    monkeypatch.setitem(registry._TACTICS, "Relu", [_relu("small"), _relu("big")])
    monkeypatch.setattr(builder_module, "choose_tactics", functools.partial(tactics.choose_tactics, timer=RowTimer()))
    config = BuilderConfig(device="cpu", profiles=tfg.api.high_level._as_profile(SHAPES), optimization_level=1)
    return tfg.build(two_relus(), config=config, device="cpu")


def test_the_min_point_gets_its_own_kernel_and_the_file_keeps_it(engine):
    relus = [la for la in engine.data.layers if la.op == "Relu"]
    assert [la.tactic for la in relus] == ["relu.big"] * 2                  # opt: 4 rows
    assert [la.point_tactics for la in relus] == [{"min": "relu.small"}] * 2    # max (16 rows) agrees with opt
    assert engine.data.build_info["tactics"]["per_point"] == {"min": 2, "max": 0}
    again = from_bytes(to_bytes(engine.data))
    assert [la.point_tactics for la in again.layers if la.op == "Relu"] == [{"min": "relu.small"}] * 2
    from tensorforge.runtime.profiler import format_layer_info, layer_info
    assert format_layer_info(again).count("tactic=relu.big min:tactic=relu.small") == 2      # --dumpLayerInfo
    assert [la.get("PointTactics") for la in layer_info(again)["Layers"] if la["LayerType"] == "Relu"] == \
        [{"min": "relu.small"}] * 2


# profile 1..4..16 rows: 2 rows is the geometric mean of min and opt, a tie, which goes to opt
@pytest.mark.parametrize("rows, want", [(1, "small"), (2, "big"), (3, "big"), (4, "big"), (16, "big")])
def test_each_call_runs_the_nearest_points_kernels(engine, rows, want):
    ctx = ExecutionContext(from_bytes(to_bytes(engine.data)), "cpu")
    x = np.random.default_rng(rows).standard_normal((rows, 8)).astype(np.float32)
    RAN.clear()
    got = ctx.run({"x": torch.from_numpy(x)})["y"].numpy()
    assert RAN == [want, want]
    np.testing.assert_array_equal(got, ort_run(two_relus(), {"x": x})["y"])


def test_nearest_point_by_log_volume_worked_by_hand():
    prof = {"x": ((1, 8), (8, 8), (32, 8))}          # boundaries √8 ≈ 2.83 and √256 = 16 rows; ties go to opt
    assert [nearest_point(prof, {"x": (b, 8)}) for b in (1, 2, 3, 8, 16, 17, 32)] == \
        ["min", "min", "opt", "opt", "opt", "max", "max"]
    two = {"a": ((1, 4), (2, 64), (4, 128)), "b": ((1,), (1,), (1,))}      # a fixed input adds nothing
    assert nearest_point(two, {"a": (1, 4), "b": (1,)}) == "min"
    assert nearest_point(two, {"a": (4, 100), "b": (1,)}) == "max"         # ln 400 nearer ln 512 than ln 128


def test_turned_off_and_static_builds_record_nothing(monkeypatch):
    monkeypatch.setitem(registry._TACTICS, "Relu", [_relu("small"), _relu("big")])
    monkeypatch.setattr(builder_module, "choose_tactics", functools.partial(tactics.choose_tactics, timer=RowTimer()))
    off = tfg.build(two_relus(), device="cpu", config=BuilderConfig(
        device="cpu", profiles=tfg.api.high_level._as_profile(SHAPES), optimization_level=1, point_tactics=False))
    static = tfg.build(two_relus(), device="cpu", config=BuilderConfig(
        device="cpu", profiles=tfg.api.high_level._as_profile({"x": (1, 8)}), optimization_level=1))
    for eng in (off, static):
        assert all(la.point_tactics is None for la in eng.data.layers)
        assert "per_point" not in eng.data.build_info["tactics"]
    assert [la.tactic for la in static.data.layers if la.op == "Relu"] == ["relu.small"] * 2


def test_a_crafted_point_entry_is_refused_or_fails_cleanly(engine):
    data = to_bytes(engine.data)

    def bad_key(m):
        next(la for la in m["layers"] if la["op"] == "Relu")["point_tactics"] = {"mid": "relu.small"}
    with pytest.raises(EngineFileError, match="point_tactics"):
        from_bytes(edit(data, bad_key), "crafted.engine")

    def other_op(m):
        next(la for la in m["layers"] if la["op"] == "Relu")["point_tactics"] = {"min": "conv.cpu_onednn_nhwc"}
    loaded = from_bytes(edit(data, other_op), "crafted.engine")        # a well-formed id of a tactic Relu lacks
    with pytest.raises(TensorforgeError, match="min point"):
        ExecutionContext(loaded, "cpu")
