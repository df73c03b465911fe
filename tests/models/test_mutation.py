"""Mutation tests: each model-level check fails when one tactic is broken on purpose, and passes when it is not.

`broken(monkeypatch, op, tactic, layer_op, factor)` wraps one registered tactic's `build` so every kernel it makes
scales its floating outputs by `factor` (1.01: a 1 % error, ten times the checks' rtol) on layers whose op is
`layer_op`; `broken_reference(monkeypatch, op)` does the same to an IR op's reference (the light models' Conv:
`broken_conv` breaks it and the CPU convolution tactic together).
Both count the calls, so a mutation the model never reaches cannot pass as "caught". Each case calls
the comparison function the model test itself calls and asserts that it raises AssertionError; the control
case (factor 1, same wrapper) asserts that the wrapper alone changes nothing. Checks covered:

    tests/models/test_light_models.py        model_checks.check_light          (9 re-seeded light models)
    tests/models/test_cnn_models.py          check_cnn                          (5 CNN/ViT, legacy opset 17)
    tests/models/test_transformer_models.py  check_dynamic_profile              (BERT, GPT-2)
    tests/test_seed_gelu.py                  test_seed_model_matches_onnxruntime (oracle.check_against_ort)
    tests/passes/fusion_helpers.py           check_fused                        (every fusion test's numerics)
    bench/gpu_check_models.py                _build_and_check                   (gpu_check's "models" rows, on CPU)
"""

import importlib.util
from pathlib import Path

import pytest
import torch

from light_reseed import MODELS as LIGHT_MODELS
from model_checks import check_light

from tensorforge.ir import get_spec
from tensorforge.kernels import onednn_capi, registry

TESTS = Path(__file__).resolve().parents[1]
# the CPU convolution tactic builds choose: oneDNN primitives through its C library when it is installed
CPU_CONV = "cpu_dnnl" if onednn_capi.library() is not None else "cpu_onednn_nhwc"
# the CPU linear tactic untimed builds choose: oneDNN matmul primitives (C library) first, torch's oneDNN linear else
CPU_LINEAR = "cpu_dnnl" if onednn_capi.library() is not None else "onednn_linear"


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(f"mutation_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def broken(monkeypatch, op: str, tactic: str, layer_op: str | None = None, factor: float = 1.01) -> dict:
    """Make tactic `tactic` of registry op `op` scale its outputs by `factor`; returns the call counter."""
    (target,) = [t for t in registry._TACTICS[op] if t.name == tactic]
    original, calls = target.build, {"n": 0}

    def build(layer, cfg, device):
        kernel = original(layer, cfg, device)
        if layer_op is not None and layer.op != layer_op:
            return kernel

        def run(inputs):
            calls["n"] += 1
            return [o * factor if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in kernel(inputs)]
        return run
    monkeypatch.setattr(target, "build", build)
    return calls


def broken_reference(monkeypatch, op: str, factor: float = 1.01) -> dict:
    """Make the IR op's reference implementation scale its floating outputs by `factor` (every CPU path of the
    op that calls it breaks: torch_ref, and FusedConv/FusedConvPool's torch_conv for Conv); the call counter."""
    spec, calls = get_spec(op), {"n": 0}
    original = spec.reference

    def reference(*args, **kw):
        calls["n"] += 1
        out = original(*args, **kw)
        return out * factor if isinstance(out, torch.Tensor) and out.is_floating_point() else out
    monkeypatch.setattr(spec, "reference", reference)
    return calls


class _Calls:
    """The summed call counters of several mutations, read as calls["n"]."""

    def __init__(self, parts):
        self.parts = parts

    def __getitem__(self, key):
        return sum(p[key] for p in self.parts)


def broken_conv(monkeypatch, factor: float = 1.01) -> _Calls:
    """Every CPU convolution path scaled by `factor`: the Conv reference (torch_ref, torch_conv) and both oneDNN
    tactics of Conv, FusedConv and FusedConvPool (kernels/cpu_dnnl_conv.py, which CPU builds choose when oneDNN's C
    library is installed, and kernels/cpu_conv_onednn.py)."""
    return _Calls([broken_reference(monkeypatch, "Conv", factor)] + [
        broken(monkeypatch, op, tactic, factor=factor) for op in ("Conv", "FusedConv", "FusedConvPool")
        for tactic in dict.fromkeys([CPU_CONV, "cpu_onednn_nhwc"])])


def _mutate(monkeypatch, op, tactic, layer_op, factor):
    if tactic:
        return broken(monkeypatch, op, tactic, layer_op, factor)
    return broken_conv(monkeypatch, factor) if op == "Conv" else broken_reference(monkeypatch, op, factor)


def _caught(check, monkeypatch, op, tactic=None, layer_op=None):
    calls = _mutate(monkeypatch, op, tactic, layer_op, 1.01)
    with pytest.raises(AssertionError, match="tolerance|Mismatch"):
        check()
    assert calls["n"] > 0, f"{op}.{tactic} never ran: the mutation says nothing about this check"


def _passes(check, monkeypatch, op, tactic=None, layer_op=None):
    calls = _mutate(monkeypatch, op, tactic, layer_op, 1.0)
    check()
    assert calls["n"] > 0


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_check_catches_a_broken_conv(name, monkeypatch):
    """The Conv reference scaled by 1.01: densenet121 and inception_v2 run their convolutions as plain Conv
    layers (torch_ref), the others mostly as FusedConv (torch_conv); both call it."""
    _caught(lambda: check_light(name), monkeypatch, "Conv")


def test_light_check_passes_with_the_identity_mutation(monkeypatch):
    _passes(lambda: check_light("squeezenet"), monkeypatch, "Conv")


CNN_TARGETS = {"resnet": ("FusedConv", CPU_CONV), "mobilenet_v3": ("FusedConv", CPU_CONV),
               "efficientnet": ("FusedConv", CPU_CONV), "convnext": ("MatMulEpilogue", CPU_LINEAR),
               "vit": ("MatMulEpilogue", CPU_LINEAR)}


@pytest.mark.parametrize("name", list(CNN_TARGETS))
def test_cnn_check_catches_a_broken_tactic(name, monkeypatch, tmp_path):
    cnn = _module(TESTS / "models" / "test_cnn_models.py")
    _caught(lambda: cnn.check_cnn(name, False, 17, tmp_path), monkeypatch, *CNN_TARGETS[name])


def test_cnn_check_passes_with_the_identity_mutation(monkeypatch, tmp_path):
    cnn = _module(TESTS / "models" / "test_cnn_models.py")
    _passes(lambda: cnn.check_cnn("resnet", False, 17, tmp_path), monkeypatch, "FusedConv", CPU_CONV)


@pytest.mark.parametrize("kind", ["bert", "gpt2"])
def test_transformer_check_catches_a_broken_linear(kind, monkeypatch, tmp_path):
    pytest.importorskip("transformers")
    tr = _module(TESTS / "models" / "test_transformer_models.py")
    _caught(lambda: tr.check_dynamic_profile(kind, "legacy-17", tmp_path), monkeypatch,
            "MatMulEpilogue", CPU_LINEAR)


def test_transformer_check_passes_with_the_identity_mutation(monkeypatch, tmp_path):
    pytest.importorskip("transformers")
    tr = _module(TESTS / "models" / "test_transformer_models.py")
    _passes(lambda: tr.check_dynamic_profile("bert", "legacy-17", tmp_path), monkeypatch,
            "MatMulEpilogue", CPU_LINEAR)


@pytest.mark.parametrize("dynamo,opset,ops", [(False, 11, ["Div", "Erf", "Add", "Mul", "Mul"] * 2),
                                              (True, 20, ["Gelu", "Gelu"])])
def test_seed_gelu_check_catches_a_broken_chain(dynamo, opset, ops, monkeypatch, tmp_path):
    seed = _module(TESTS / "test_seed_gelu.py")
    check = lambda: seed.test_seed_model_matches_onnxruntime(tmp_path, dynamo, opset, ops)  # noqa: E731
    _caught(check, monkeypatch, "*", "torch_ref", layer_op="PointwiseChain")


def test_seed_gelu_check_passes_with_the_identity_mutation(monkeypatch, tmp_path):
    seed = _module(TESTS / "test_seed_gelu.py")
    check = lambda: seed.test_seed_model_matches_onnxruntime(tmp_path, False, 11, ["Div", "Erf", "Add", "Mul", "Mul"] * 2)  # noqa: E731
    _passes(check, monkeypatch, "*", "torch_ref", layer_op="PointwiseChain")


def _fusion_case():
    import numpy as np
    helpers = _module(TESTS / "passes" / "fusion_helpers.py")
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
    model = helpers.export_quiet(mlp, (torch.randn(4, 16),), opset=17)
    feeds = helpers.feeds_for(model, np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32))
    return lambda: helpers.check_fused(model, feeds)


def test_fusion_check_catches_a_broken_linear(monkeypatch):
    _caught(_fusion_case(), monkeypatch, "MatMulEpilogue", CPU_LINEAR)


def test_fusion_check_passes_with_the_identity_mutation(monkeypatch):
    _passes(_fusion_case(), monkeypatch, "MatMulEpilogue", CPU_LINEAR)


def _gpu_check_row(name="squeezenet"):
    """gpu_check's light-model row for `name`, run on the CPU in this process: its status."""
    import sys
    bench = str(TESTS.parent / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import gpu_check_models
    from gpu_check_common import Context, Row
    ctx = Context(torch.device("cpu"), smoke=True, iters=1, max_configs=1, budget_s=1e9)
    row = Row("models", f"light_{name}")
    gpu_check_models._build_and_check(ctx, row, name, {})
    return row


def test_gpu_check_models_row_fails_with_a_broken_conv(monkeypatch):
    calls = broken_conv(monkeypatch)
    row = _gpu_check_row()
    assert calls["n"] > 0 and row.status == "FAIL", (row.status, row.note)


def test_gpu_check_models_row_passes_unbroken():
    row = _gpu_check_row()
    assert row.status == "PASS", row.note
