"""The Triton tree walker (kernels/trees_triton.py) under TRITON_INTERPRET=1 on the CPU, against onnxruntime:
random ensembles (each branch mode, NaN with missing tracks, several targets, base values, AVERAGE) and the
converted gradient-boosting model; and the reasons it gives where it does not apply."""

import os

import numpy as np
import pytest
import torch

pytest.importorskip("triton")
if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("Triton kernels run on the CPU only under TRITON_INTERPRET=1 (CI sets it)", allow_module_level=True)

from oracle import ort_run  # noqa: E402
from tensorforge.api.high_level import parse  # noqa: E402
from tensorforge.kernels.trees_triton import TritonTrees, layout_reason  # noqa: E402

import random_trees as rt  # noqa: E402

GRID = np.round(np.linspace(-2, 2, 9), 2)


def _layer(model):
    return next(la for la in parse(model).layers if la.op.startswith("TreeEnsemble"))


def _run(model, x):
    layer = _layer(model)
    assert layout_reason(layer) is None
    return TritonTrees(layer, torch.device("cpu"))([torch.from_numpy(x)])


@pytest.mark.parametrize("mode", rt.MODES)
def test_regressor_each_mode(mode):
    # a fixed seed per mode: hash(str) is salted per process, which made the ensembles (and the outcome) vary
    rng = np.random.default_rng(101 + rt.MODES.index(mode))
    trees = rt.random_trees(rng, 7, 4, 2, 4, [mode], GRID)
    model = rt.model_of(rt.v3_node(trees, "target", 2, aggregate_function="AVERAGE", base_values=[0.5, -1.0]), 4,
                        [("Y", 1)])
    x = rt.inputs(rng, 150, 4, GRID)
    got = _run(model, x)[0].numpy()
    np.testing.assert_allclose(got, ort_run(model, {"X": x})["Y"], rtol=1e-5, atol=1e-5)


def test_classifier_softmax():
    rng = np.random.default_rng(4)
    trees = rt.random_trees(rng, 9, 5, 3, 4, ["BRANCH_LEQ"], GRID)
    model = rt.model_of(rt.v3_node(trees, "class", 3, post_transform="SOFTMAX"), 5, [("label", 7), ("scores", 1)])
    x = rt.inputs(rng, 300, 5, GRID)
    want = ort_run(model, {"X": x})
    labels, probs = _run(model, x)
    np.testing.assert_array_equal(labels.numpy(), want["label"])
    np.testing.assert_allclose(probs.numpy(), want["scores"], rtol=1e-5, atol=1e-5)


def test_not_applicable_reasons():
    rng = np.random.default_rng(6)
    mixed = rt.model_of(rt.v3_node(rt.random_trees(rng, 4, 3, 1, 3, rt.MODES, GRID), "target", 1), 3, [("Y", 1)])
    assert "branch modes" in layout_reason(_layer(mixed))
    mins = rt.model_of(rt.v3_node(rt.random_trees(rng, 4, 3, 1, 3, ["BRANCH_LT"], GRID), "target", 1,
                                  aggregate_function="MIN"), 3, [("Y", 1)])
    assert "SUM/AVERAGE" in layout_reason(_layer(mins))
