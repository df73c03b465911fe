"""A model's own fp32 island (Cast float16→float32 … Cast→float16) survives every precision mode; per-layer plans.

The island sums 128 values near 1000 (≈1.3e5, above float16's 65504) before scaling by 1e-3: computed in float16
it is inf, in float32 it is ≈128 — onnxruntime, evaluating the model as written, is the oracle. Breaking the island
rule on purpose (no islands) makes the same check fail.
"""

import numpy as np
import pytest
import torch

from oracle import ort_run
from precision_models import fp16_island
from tensorforge.builder import BuilderConfig, build_engine
from tensorforge.builder import precision
from tensorforge.builder.precision import PrecisionPlan, apply_precision
from tensorforge.ir import Network
from tensorforge.parser import parse_model
from tensorforge.runtime import ExecutionContext

X = (1000.0 + np.random.default_rng(0).standard_normal((2, 128))).astype(np.float16)


def _run(**flags):
    engine = build_engine(parse_model(fp16_island()), BuilderConfig(device="cpu", **flags))
    return ExecutionContext(engine, torch.device("cpu")).run({"x": torch.from_numpy(X)})["y"].numpy(), engine


@pytest.mark.parametrize("flags", [{}, {"fp16": True}, {"bf16": True}, {"best": True}, {"strongly_typed": True}])
def test_island_matches_onnxruntime_in_every_mode(flags):
    want = ort_run(fp16_island(), {"x": X})["y"]
    assert np.isfinite(want).all() and abs(float(want[0, 0]) - 128.0) < 1.0
    got, engine = _run(**flags)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3)
    ups = [la for la in engine.layers if la.op == "Cast" and la.attrs.get("to") == "float32" and "up" in la.origin]
    assert ups, "the model's Cast(to=float32) is kept"


def test_without_islands_the_check_fails(monkeypatch):
    monkeypatch.setattr(precision, "_islands", lambda net, env: set())      # the old rule: every Cast(to=fp32) → fp16
    got, _ = _run(fp16=True)
    assert not np.isfinite(got.astype(np.float32)).all()


def _chain():
    net = Network("n")
    net.add_input("x", torch.float32, (4,))
    net.add_constant("w", torch.tensor([1.0, 2.0, 3.0, 4.0]))
    net.add_layer("Mul", ["x", "w"], ["a"], name="m1")
    net.add_layer("Add", ["a", "w"], ["b"], name="m2")
    net.add_layer("Relu", ["b"], ["y"], name="m3")
    net.mark_output("y")
    return net


def test_plan_keeps_a_constrained_layer_fp32_and_copies_shared_constants():
    net = _chain()
    apply_precision(net, PrecisionPlan(torch.float16, {"m2": torch.float32}), {"y": torch.float32}, {"x": (4,)})
    by = {la.name: la for la in net.layers}
    assert (by["m1"].precision, by["m2"].precision, by["m3"].precision) == ("float16", "float32", "float16")
    assert net.constants[by["m1"].inputs[1]].dtype == torch.float16
    assert net.constants[by["m2"].inputs[1]].dtype == torch.float32           # w read by both: one copy each
    casts = [(la.inputs[0], la.attrs["to"]) for la in net.layers if la.op == "Cast"]
    assert ("x", "float16") in casts and ("a", "float32") in casts and ("b", "float16") in casts
    assert net.layers[-1].op == "Cast" and net.layers[-1].outputs == ["y"]     # the output keeps float32
    x = torch.tensor([0.1, -0.2, 0.3, 70000.0])
    env = {"x": x, **net.constants}
    from tensorforge.ir.interpret import run_reference
    for la in net.layers:
        for o, v in zip(la.outputs, run_reference(la, [env[i] for i in la.inputs])):
            env[o] = v
    assert env["y"].dtype == torch.float32 and torch.isinf(env["y"][3])       # 70000 overflows the fp16 Mul


def test_output_type_constraint_casts_after_the_layer():
    net = _chain()
    apply_precision(net, PrecisionPlan(torch.float32, {}, {"m2": [torch.float16]}), {"y": torch.float32}, {"x": (4,)})
    by = {la.name: la for la in net.layers}
    assert "b/to_float16" in by and by["b/to_float16"].outputs == ["b"]
    assert by["m3"].inputs[0] == "b/to_float32"                               # m3 computes fp32: cast back
