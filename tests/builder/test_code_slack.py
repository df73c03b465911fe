"""Tactic.code_slack: a config with an approximate epilogue (the INT8 GEMM's fast-erf GELU, ERF=fast) declares which
integer outputs may be one code off the reference and on what fraction of their elements; the builder's validation
accepts exactly that and nothing more. On the CPU with a fake timer and a test tactic for QuantizeLinear whose codes
are the reference's with a known number of elements moved (the oracle: the op's reference and the count moved)."""

import functools

import numpy as np
import pytest
import torch
from onnx import TensorProto, numpy_helper

import tensorforge as tfg
from tensorforge.builder import BuilderConfig, builder as builder_module, tactics
from tensorforge.ir import Layer, get_spec
from tensorforge.kernels import registry
from tensorforge.kernels.registry import Tactic
from tensorforge.kernels import triton_int8_gemm

from oracle import single_node_model


def q_model() -> bytes:
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"),
             numpy_helper.from_array(np.array(3, np.int8), "z")]
    return single_node_model("QuantizeLinear", [("x", TensorProto.FLOAT, [4, 256])],
                             [("y", TensorProto.INT8, [4, 256])], opset=19, initializers=inits,
                             node_inputs=["x", "s", "z"])


class FakeTimer:
    def measure(self, tactic_id, run):
        run()
        return tactics.Measurement([0.01 if ".moved" in tactic_id else 1.0] * 3)


def _moved_tactic(moved: int, step: int, slack):
    """QuantizeLinear's reference with `moved` elements `step` codes up (the fastest candidate)."""
    def build(layer, cfg, device):
        ref = get_spec(layer.op).reference

        def run(inputs):
            y = ref(*inputs, **layer.attrs).clone()
            flat = y.view(-1)
            flat[:moved] = (flat[:moved].to(torch.int16) + step).clamp(-128, 127).to(y.dtype)
            return [y]
        return run
    return Tactic("QuantizeLinear", "moved", lambda layer, device: None, build, [{}], 0, None, slack)


def _build(monkeypatch, tactic):
    monkeypatch.setitem(registry._TACTICS, "QuantizeLinear", [tactic])
    monkeypatch.setattr(builder_module, "choose_tactics", functools.partial(tactics.choose_tactics, timer=FakeTimer()))
    engine = tfg.build(q_model(), config=BuilderConfig(device="cpu", optimization_level=1), device="cpu")
    return next(layer.tactic for layer in engine.data.layers if layer.op == "QuantizeLinear")


ONE_PERCENT = lambda layer, cfg: ((0,), 0.01)  # noqa: E731


@pytest.mark.parametrize("moved, step, slack, chosen", [
    (5, 1, ONE_PERCENT, True),        # 5 of 1024 elements (0.5 %) one code off, declared: accepted
    (5, 1, None, False),              # the same codes without a declared slack: the op's default (exact) rejects
    (40, 1, ONE_PERCENT, False),      # 3.9 % of the elements: more than declared
    (1, 2, ONE_PERCENT, False),       # two codes off on one element: never
])
def test_the_declared_slack_and_nothing_more(monkeypatch, moved, step, slack, chosen):
    tactic = _build(monkeypatch, _moved_tactic(moved, step, slack))
    assert (tactic == "quantizelinear.moved") == chosen, tactic


def test_only_the_fast_erf_configs_declare_a_slack():
    layer = Layer("g", "QuantizedMatMul", ["x", "w", "b"], ["y"], {"activation": "Gelu"})
    fast = next(c for c in triton_int8_gemm.TMA_CONFIGS if c.get("ERF") == "fast")
    assert triton_int8_gemm.config_code_slack(layer, fast) == ((0,), triton_int8_gemm.FAST_ERF_CODE_FRACTION)
    assert all(triton_int8_gemm.config_code_slack(layer, c) is None
               for c in triton_int8_gemm.CONFIGS + triton_int8_gemm.TMA_CONFIGS if c is not fast)
