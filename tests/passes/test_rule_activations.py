"""Activation rules: HardSwish / HardSigmoid / Mish as the exporters write them become one layer; numerics
against onnxruntime and the unfused build (level 0); negative cases keep the graph and record the reason."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from fusion_helpers import build_logged, check_fused, ops


def _model(nodes, consts: dict, shape=(2, 3, 5, 7), out="y", extra_outputs=()):
    inits = [helper.make_tensor(n, TensorProto.FLOAT, np.shape(v), np.asarray(v, np.float32).reshape(-1).tolist())
             for n, v in consts.items()]
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in (out, *extra_outputs)]
    graph = helper.make_graph([helper.make_node(*n[:3], **(n[3] if len(n) > 3 else {})) for n in nodes], "act",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))], outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


_C = {"three": 3.0, "zero": 0.0, "six": 6.0, "sixth": 1 / 6, "one": 1.0}
_CLIP = [("Add", ["x", "three"], ["a"]), ("Clip", ["a", "zero", "six"], ["c"])]

HARDSWISH_FORMS = {
    "paddle_div_then_mul": _CLIP + [("Div", ["c", "six"], ["d"]), ("Mul", ["x", "d"], ["y"])],
    "mul_then_div": _CLIP + [("Mul", ["c", "x"], ["m"]), ("Div", ["m", "six"], ["y"])],
    "mul_by_sixth": _CLIP + [("Mul", ["x", "c"], ["m"]), ("Mul", ["sixth", "m"], ["y"])],
    "sixth_first": _CLIP + [("Mul", ["c", "sixth"], ["d"]), ("Mul", ["d", "x"], ["y"])],
    "torch_hardsigmoid_mul": [("HardSigmoid", ["x"], ["h"], {"alpha": 1 / 6, "beta": 0.5}), ("Mul", ["x", "h"], ["y"])],
}


def _x(shape=(2, 3, 5, 7)):
    return {"x": (np.random.randn(*shape) * 4).astype(np.float32)}   # covers both clip bounds


@pytest.mark.parametrize("form", sorted(HARDSWISH_FORMS))
def test_hardswish_forms_fuse(form):
    engine, _ = check_fused(_model(HARDSWISH_FORMS[form], _C), _x())
    assert ops(engine) == ["HardSwish"]
    assert engine.data.build_info["passes"]["fuse-activations"] == 1


@pytest.mark.parametrize("form", ["div", "mul"])
def test_paddle_hardsigmoid_fuses(form):
    last = ("Div", ["c", "six"], ["y"]) if form == "div" else ("Mul", ["sixth", "c"], ["y"])
    engine, _ = check_fused(_model(_CLIP + [last], _C), _x())
    assert ops(engine) == ["HardSigmoid"]
    layer = engine.data.layers[0]
    assert layer.attrs["alpha"] == pytest.approx(1 / 6) and layer.attrs["beta"] == pytest.approx(0.5)


def test_keras_hardsigmoid_fuses_with_its_constants():
    nodes = [("Mul", ["x", "alpha"], ["m"]), ("Add", ["beta", "m"], ["a"]), ("Clip", ["a", "zero", "one"], ["y"])]
    engine, _ = check_fused(_model(nodes, {**_C, "alpha": 0.2, "beta": 0.5}), _x())
    assert ops(engine) == ["HardSigmoid"]
    assert engine.data.layers[0].attrs["alpha"] == pytest.approx(0.2)


@pytest.mark.parametrize("softplus", ["op", "log_exp"])
def test_mish_fuses(softplus):
    sp = [("Softplus", ["x"], ["s"])] if softplus == "op" else \
        [("Exp", ["x"], ["e"]), ("Add", ["e", "one"], ["p"]), ("Log", ["p"], ["s"])]
    engine, _ = check_fused(_model(sp + [("Tanh", ["s"], ["t"]), ("Mul", ["t", "x"], ["y"])], _C), _x())
    assert ops(engine) == ["Mish"]


def test_conv_then_written_out_hardswish_becomes_one_fused_conv():
    w = np.random.randn(4, 3, 3, 3).astype(np.float32) * 0.3
    nodes = [("Conv", ["x", "w"], ["cx"], {"pads": [1, 1, 1, 1]})] + \
        [(op, [("cx" if i == "x" else i) for i in ins], outs) for op, ins, outs in HARDSWISH_FORMS["paddle_div_then_mul"]]
    inits = {**_C, "w": w}
    engine, _ = check_fused(_model(nodes, inits), _x())
    assert ops(engine) == ["FusedConv"] and engine.data.layers[0].attrs["activation"] == "HardSwish"


# ---- negative cases: the graph stays, the reason is recorded ----------------------------------------------

def test_wrong_clip_bound_is_rejected_with_its_reason():
    nodes = [("Add", ["x", "three"], ["a"]), ("Clip", ["a", "zero", "five"], ["c"]), ("Div", ["c", "six"], ["d"]),
             ("Mul", ["x", "d"], ["y"])]
    engine, log = check_fused(_model(nodes, {**_C, "five": 5.0}), _x())
    assert "HardSwish" not in ops(engine) and "HardSigmoid" not in ops(engine)
    assert "x·clip(x+3,0,6)/6 ⇒ HardSwish(x): not applied at 'Mul_3'" in log


def test_shared_clip_is_rejected_with_its_reason():
    nodes = HARDSWISH_FORMS["paddle_div_then_mul"] + [("Neg", ["c"], ["z"])]
    engine, log = check_fused(_model(nodes, _C, extra_outputs=("z",)), _x())
    assert "HardSwish" not in ops(engine)
    assert "intermediate 'c' is also read by layer" in log


def test_other_tensor_times_hardsigmoid_is_not_hardswish():
    """h·z with z ≠ x is a gated product, not HardSwish."""
    nodes = [("HardSigmoid", ["x"], ["h"], {"alpha": 1 / 6, "beta": 0.5}), ("Neg", ["x"], ["z"]),
             ("Mul", ["z", "h"], ["y"])]
    engine, log = check_fused(_model(nodes, _C), _x())
    assert "HardSwish" not in ops(engine)
    assert "HardSwish(x): not applied" in log


def test_broadcasting_constant_is_rejected_with_its_reason():
    """A (1,1,1) divisor makes the (3,5) result rank 3: HardSwish(x) would not broadcast it."""
    nodes = _CLIP + [("Div", ["c", "six_b"], ["d"]), ("Mul", ["x", "d"], ["y"])]
    engine, log = check_fused(_model(nodes, {**_C, "six_b": np.full((1, 1, 1), 6.0)}, shape=(3, 5)), _x((3, 5)))
    assert "HardSwish" not in ops(engine)
    assert "HardSwish(x): not applied at 'Mul_3'" in log


def test_level_0_keeps_the_decomposed_graph():
    engine, _ = build_logged(_model(HARDSWISH_FORMS["paddle_div_then_mul"], _C), optimization_level=0)
    assert ops(engine) == ["Add", "Clip", "Div", "Mul"]


def test_the_oracle_sees_a_broken_rewrite(monkeypatch):
    """The numerics check can fail: a HardSwish rewrite that emits HardSigmoid instead is caught."""
    from tensorforge.passes.rules import activations

    def wrong(self, m, g):
        return [self.new_layer(g, m, "HardSigmoid", [m["x"]], attrs={"alpha": 1 / 6, "beta": 0.5})]
    monkeypatch.setattr(activations.HardSwishRule, "rewrite", wrong)
    with pytest.raises(AssertionError):
        check_fused(_model(HARDSWISH_FORMS["paddle_div_then_mul"], _C), _x())
