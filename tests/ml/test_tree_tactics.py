"""Every tree-ensemble tactic (traverse_perfect, traverse, gemm, the reference) against onnxruntime on random
ensembles covering all branch modes, NaN inputs with missing-value tracks, aggregate functions, base values,
post transforms, several targets, the binary-classifier encoding and TreeEnsemble 5 with set membership; and on
the converted scikit-learn / LightGBM forests. A deliberately broken comparison must make the check fail."""

import numpy as np
import pytest
import torch

from tensorforge.api.high_level import parse
from oracle import ort_run
from tensorforge.kernels import candidates, instantiate

import random_trees as rt

TREE_OPS = ("TreeEnsembleRegressor", "TreeEnsembleClassifier")
GRID = np.round(np.linspace(-2, 2, 9), 2)


def _tree_layer(model: bytes):
    net = parse(model)
    layers = [la for la in net.layers if la.op in TREE_OPS]
    assert len(layers) == 1
    return layers[0]


def _tactic_ids(layer):
    found, _ = candidates(layer, torch.device("cpu"))
    return [t.id(c) for t, c in found]


def _check_all_tactics(model, x, want_names, expect=None, rtol=1e-5, atol=1e-5, only=None):
    want = ort_run(model, {"X": x})
    layer = _tree_layer(model)
    ids = only or _tactic_ids(layer)
    if expect:
        assert set(expect) <= set(ids), ids
    for tid in ids:
        got = instantiate(tid, layer, torch.device("cpu"))([torch.from_numpy(x)])
        for name, g in zip(want_names, got):
            w = want[name]
            g = g.numpy()
            assert g.shape == w.shape and g.dtype == w.dtype, (tid, name, g.shape, w.shape, g.dtype, w.dtype)
            if np.issubdtype(w.dtype, np.integer):
                np.testing.assert_array_equal(g, w, err_msg=f"{tid} {name}")
            else:
                np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{tid} {name}")
    return ids


@pytest.mark.parametrize("modes", [["BRANCH_LEQ"], rt.MODES])
@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
def test_regressor_modes_and_aggregates(modes, aggregate):
    rng = np.random.default_rng(len(modes) * 7 + len(aggregate))
    trees = rt.random_trees(rng, 12, 5, 3, 4, modes, GRID)
    node = rt.v3_node(trees, "target", 3, aggregate_function=aggregate, base_values=[0.5, -1.0, 2.0])
    model = rt.model_of(node, 5, [("Y", 1)])
    ids = _check_all_tactics(model, rt.inputs(rng, 300, 5, GRID), ["Y"])
    assert any("gemm" in i for i in ids) and any("traverse_perfect" in i for i in ids)


@pytest.mark.parametrize("post", ["NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO"])
def test_classifier_post_transforms(post):
    rng = np.random.default_rng(3)
    trees = rt.random_trees(rng, 10, 4, 4, 4, rt.MODES, GRID)
    model = rt.model_of(rt.v3_node(trees, "class", 4, post_transform=post), 4, [("label", 7), ("scores", 1)])
    _check_all_tactics(model, rt.inputs(rng, 300, 4, GRID), ["label", "scores"])


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC"])
def test_binary_classifier_one_score(post):
    """Every vote for class 0 (how gradient boosting writes two classes): class 1 scores s, class 0 1−s or −s."""
    rng = np.random.default_rng(5)
    trees = rt.random_trees(rng, 8, 4, 1, 3, ["BRANCH_LEQ"], GRID)
    node = rt.v3_node(trees, "class", 1, post_transform=post, classlabels_int64s=[0, 1], base_values=[0.25])
    model = rt.model_of(node, 4, [("label", 7), ("scores", 1)])
    _check_all_tactics(model, rt.inputs(rng, 200, 4, GRID, nan_rate=0), ["label", "scores"])


def test_regressor_probit_one_target():
    rng = np.random.default_rng(11)
    trees = rt.random_trees(rng, 6, 3, 1, 3, ["BRANCH_LT"], GRID)
    for nodes, votes in trees:                     # probabilities in (0, 1) after averaging
        for k in votes:
            votes[k] = [(0, float(rng.uniform(0.05, 0.95)))]
    node = rt.v3_node(trees, "target", 1, aggregate_function="AVERAGE", post_transform="PROBIT")
    model = rt.model_of(node, 3, [("Y", 1)])
    _check_all_tactics(model, rt.inputs(rng, 200, 3, GRID, nan_rate=0), ["Y"], atol=1e-4)


def test_tree_ensemble_5_with_set_membership():
    """Integer-valued inputs: onnxruntime truncates x to int32 before a set test (1.2 ∈ {1}), the ONNX spec and
    onnx.reference do not; tensorforge follows the spec, and the two agree on integers."""
    rng = np.random.default_rng(13)
    trees = rt.random_trees(rng, 6, 4, 2, 3, ["BRANCH_LEQ", "BRANCH_GT"], GRID)
    members = {(0, 0): [-1.0, 1.0, 2.0], (2, 0): [0.0]}      # onnxruntime: integer sets only
    model = rt.model_of(rt.v5_node(trees, 2, members=members, aggregate_function=1, post_transform=0), 4,
                        [("Y", 1)], ml_opset=5)
    x = rng.integers(-2, 3, size=(200, 4)).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan
    ids = _check_all_tactics(model, x, ["Y"])
    assert not any("gemm" in i or "perfect" in i for i in ids)      # ∈ nodes: traverse (and the reference) only
    plain = rt.model_of(rt.v5_node(trees, 2, aggregate_function=0, post_transform=0), 4, [("Y", 1)], ml_opset=5)
    _check_all_tactics(plain, rt.inputs(rng, 200, 4, GRID), ["Y"], expect=None)


@pytest.mark.parametrize("name", ["rf_cancer_binary", "gb_iris", "gb_regressor", "lightgbm_iris"])
def test_converted_forests_every_tactic(name):
    if name.startswith("lightgbm"):
        pytest.importorskip("lightgbm")
    pytest.importorskip("skl2onnx")
    import corpus
    onx, x = corpus.model(name)
    import onnx
    m = onnx.load_from_string(onx)
    node = next(n for n in m.graph.node if n.op_type in TREE_OPS)
    assert list(node.input) == [m.graph.input[0].name]
    node.input[0] = "X"
    outs = [("Y", 1)] if node.op_type == "TreeEnsembleRegressor" else [("label", 7), ("scores", 1)]
    del node.output[:]
    node.output.extend([n for n, _ in outs])
    single = rt.model_of(node, x.shape[1], outs)
    _check_all_tactics(single, x, [n for n, _ in outs])


def test_broken_comparison_is_caught(monkeypatch):
    """≤ replaced by < in every tactic: the check against onnxruntime fails (data on the thresholds' grid)."""
    from tensorforge.ir.ops import ml_trees
    rng = np.random.default_rng(17)
    trees = rt.random_trees(rng, 10, 4, 1, 4, ["BRANCH_LEQ"], GRID)
    model = rt.model_of(rt.v3_node(trees, "target", 1), 4, [("Y", 1)])
    x = rt.inputs(rng, 200, 4, GRID, nan_rate=0)
    ids = _check_all_tactics(model, x, ["Y"])
    assert len(ids) == 4
    monkeypatch.setitem(ml_trees._CMP, 0, torch.lt)
    for tid in ids:
        with pytest.raises(AssertionError):
            _check_all_tactics(model, x, ["Y"], only=[tid])


def test_cpu_build_picks_the_flat_traversal_for_single_rows_and_batches():
    import tensorforge as tfg
    rng = np.random.default_rng(19)
    trees = rt.random_trees(rng, 8, 4, 1, 3, ["BRANCH_LEQ"], GRID)
    model = rt.model_of(rt.v3_node(trees, "target", 1), 4, [("Y", 1)])
    x = rt.inputs(rng, 256, 4, GRID, nan_rate=0)
    want = ort_run(model, {"X": x})["Y"]
    for opt, expect in ((1, ".traverse"), (256, ".traverse")):     # kernels/trees_traverse.Traverse docstring
        eng = tfg.build(model, device="cpu", shapes={"X": ((1, 4), (opt, 4), (256, 4))})
        tactic = next(la.tactic for la in eng.data.layers if la.op in TREE_OPS)
        assert tactic.endswith(expect), tactic
        np.testing.assert_allclose(eng.run({"X": x})["Y"], want, rtol=1e-5, atol=1e-5)
