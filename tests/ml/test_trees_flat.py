"""The flat traversal (kernels/trees_traverse._Flat, tactic `traverse`) in each of its plans — the whole-forest
next-node table walked (walk) or squared (jump), and the level-by-level walk (level) — forced in turn, against
onnxruntime on random
ensembles with every branch mode, NaN inputs with missing-value tracks, several targets and the binary encoding;
at 1 row and at 300. A deliberately wrong child choice must fail the check."""

import numpy as np
import pytest
import torch

from oracle import ort_run
from tensorforge.api.high_level import parse
from tensorforge.kernels import instantiate
from tensorforge.kernels import trees_traverse

import random_trees as rt

GRID = np.round(np.linspace(-2, 2, 9), 2)


def _run(model, x):
    layer = next(la for la in parse(model).layers if la.op.startswith("TreeEnsemble"))
    return instantiate("treeensemble" + layer.op[len("TreeEnsemble"):].lower() + ".traverse", layer,
                       torch.device("cpu"))([torch.from_numpy(x)])


def _compare(model, x, names):
    want = ort_run(model, {"X": x})
    for name, g in zip(names, _run(model, x)):
        w, g = want[name], g.numpy()
        assert g.shape == w.shape and g.dtype == w.dtype, (name, g.shape, w.shape)
        if np.issubdtype(w.dtype, np.integer):
            np.testing.assert_array_equal(g, w, err_msg=name)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.fixture(params=["walk", "jump", "level"])
def strategy(request, monkeypatch):
    monkeypatch.setattr(trees_traverse._Flat, "plan", lambda self, n: request.param)
    return request.param


def _models(rng):
    many = rt.random_trees(rng, 9, 5, 3, 5, rt.MODES, GRID)          # every mode, missing tracks, 3 targets
    reg = rt.model_of(rt.v3_node(many, "target", 3, base_values=[0.5, -1.0, 2.0]), 5, [("Y", 1)])
    cls = rt.model_of(rt.v3_node(many, "class", 3, post_transform="SOFTMAX"), 5, [("label", 7), ("scores", 1)])
    one = rt.random_trees(rng, 7, 5, 1, 4, ["BRANCH_LEQ"], GRID)
    binary = rt.model_of(rt.v3_node(one, "class", 1, post_transform="LOGISTIC", classlabels_int64s=[3, 8]), 5,
                         [("label", 7), ("scores", 1)])
    return [(reg, ["Y"]), (cls, ["label", "scores"]), (binary, ["label", "scores"])]


@pytest.mark.parametrize("rows", [1, 300])
def test_flat_strategies_match_onnxruntime(strategy, rows):
    rng = np.random.default_rng(23)
    for model, names in _models(rng):
        x = rt.inputs(rng, rows, 5, GRID)
        _compare(model, x, names)


def test_wrong_child_is_caught(strategy, monkeypatch):
    """true and false children swapped in the flat arrays: the comparison with onnxruntime fails."""
    rng = np.random.default_rng(29)
    model, names = _models(rng)[0]
    x = rt.inputs(rng, 50, 5, GRID, nan_rate=0)
    _compare(model, x, names)
    init = trees_traverse._Flat.__init__

    def swapped(self, forest):
        init(self, forest)
        self.true, self.false, self.delta = self.false, self.true, -self.delta
    monkeypatch.setattr(trees_traverse._Flat, "__init__", swapped)
    with pytest.raises(AssertionError):
        _compare(model, x, names)


def test_cost_model_switches_with_rows():
    """scikit-learn's random forest on breast cancer (30 unlimited-depth trees): the squared whole table at 1 row,
    the level walk at 1000 rows."""
    pytest.importorskip("skl2onnx")
    import corpus
    from tensorforge.ir.ops.ml_trees import Forest
    layer = next(la for la in parse(corpus.model("rf_cancer_binary")[0]).layers if la.op.startswith("TreeEnsemble"))
    flat = trees_traverse._Flat(Forest(layer.attrs))
    assert flat.depth >= 8 and flat.plan(1) == "jump" and flat.plan(1000) == "level"
