"""Random tree ensembles as ONNX nodes (ai.onnx.ml TreeEnsembleRegressor/Classifier 3, TreeEnsemble 5) for the
semantics tests: every branch mode, missing-value tracks, several targets, random thresholds near the data."""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]


def random_trees(rng, n_trees, n_features, n_targets, max_depth, modes, grid):
    """[(nodes: list of dict, leaves: {node id: [(target, weight)]})] per tree, node ids 0.. in creation order."""
    trees = []
    for _ in range(n_trees):
        nodes, votes = [], {}

        def grow(depth):
            nid = len(nodes)
            nodes.append(None)
            if depth == max_depth or (depth > 0 and rng.random() < 0.25):
                nodes[nid] = {"mode": "LEAF"}
                k = rng.integers(1, n_targets + 1)
                votes[nid] = [(int(t), float(rng.normal())) for t in rng.choice(n_targets, k, replace=False)]
                return nid
            node = {"mode": str(rng.choice(modes)), "feature": int(rng.integers(n_features)),
                    "value": float(rng.choice(grid)), "missing": int(rng.integers(2))}
            nodes[nid] = node
            node["true"] = grow(depth + 1)
            node["false"] = grow(depth + 1)
            return nid
        grow(0)
        trees.append((nodes, votes))
    return trees


def v3_node(trees, kind, n_targets, **attrs):
    """A TreeEnsembleRegressor (kind='target') or TreeEnsembleClassifier (kind='class') node."""
    cols = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
                            "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true")}
    votes = {f"{kind}_{k}": [] for k in ("treeids", "nodeids", "ids", "weights")}
    for t, (nodes, leaves) in enumerate(trees):
        for i, n in enumerate(nodes):
            leaf = n["mode"] == "LEAF"
            for k, v in (("treeids", t), ("nodeids", i), ("featureids", n.get("feature", 0)), ("modes", n["mode"]),
                         ("values", n.get("value", 0.0)), ("truenodeids", n.get("true", 0)),
                         ("falsenodeids", n.get("false", 0)), ("missing_value_tracks_true", n.get("missing", 0))):
                cols[f"nodes_{k}"].append(v)
            if leaf:
                for target, w in leaves[i]:
                    for k, v in (("treeids", t), ("nodeids", i), ("ids", target), ("weights", w)):
                        votes[f"{kind}_{k}"].append(v)
    op = "TreeEnsembleRegressor" if kind == "target" else "TreeEnsembleClassifier"
    outs = ["Y"] if kind == "target" else ["label", "scores"]
    if kind == "target":
        attrs.setdefault("n_targets", n_targets)
    else:
        attrs.setdefault("classlabels_int64s", list(range(10, 10 + n_targets)))
    return helper.make_node(op, ["X"], outs, domain="ai.onnx.ml", **cols, **votes, **attrs)


def v5_node(trees, n_targets, members=None, **attrs):
    """TreeEnsemble (ml opset 5) of the same trees: leaves in their own arrays, one vote per leaf (first target).
    `members`: {(tree, node): [values]} turns those nodes into BRANCH_MEMBER (mode 6)."""
    mode5 = {m: i for i, m in enumerate(MODES)}
    f, s, m, tn, tl, fn, fl, miss, roots, lt, lw, mv = ([] for _ in range(12))
    for t, (nodes, leaves) in enumerate(trees):
        inner = {i: k for k, i in enumerate(i for i, n in enumerate(nodes) if n["mode"] != "LEAF")}
        leaf_of = {}
        for i, n in enumerate(nodes):
            if n["mode"] == "LEAF":
                leaf_of[i] = len(lt)
                target, w = leaves[i][0]
                lt.append(target), lw.append(w)
        base = len(f)
        roots.append(base + inner[0])
        for i, n in enumerate(nodes):
            if n["mode"] == "LEAF":
                continue
            f.append(n["feature"]), miss.append(n["missing"])
            if members and (t, i) in members:
                m.append(6), s.append(float("nan")), mv.extend(members[t, i] + [float("nan")])
            else:
                m.append(mode5[n["mode"]]), s.append(n["value"])
            for child, ids, leafs in ((n["true"], tn, tl), (n["false"], fn, fl)):
                is_leaf = nodes[child]["mode"] == "LEAF"
                ids.append(leaf_of[child] if is_leaf else base + inner[child]), leafs.append(int(is_leaf))
    tensor = numpy_helper.from_array
    extra = {"membership_values": tensor(np.array(mv, np.float32))} if mv else {}
    return helper.make_node(
        "TreeEnsemble", ["X"], ["Y"], domain="ai.onnx.ml", nodes_featureids=f,
        nodes_splits=tensor(np.array(s, np.float32)), nodes_modes=tensor(np.array(m, np.uint8)),
        nodes_truenodeids=tn, nodes_trueleafs=tl, nodes_falsenodeids=fn, nodes_falseleafs=fl,
        nodes_missing_value_tracks_true=miss, tree_roots=roots, leaf_targetids=lt,
        leaf_weights=tensor(np.array(lw, np.float32)), n_targets=n_targets, **extra, **attrs)


def model_of(node, n_features, outputs, ml_opset=3):
    graph = helper.make_graph([node], "trees", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, n_features])],
                              [helper.make_tensor_value_info(n, t, None) for n, t in outputs])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", ml_opset)])
    m.ir_version = 10
    return m.SerializeToString()


def inputs(rng, n, n_features, grid, nan_rate=0.1):
    x = rng.choice(grid, size=(n, n_features)).astype(np.float32)     # on the grid: = and ≠ tests get hits
    x += (rng.random(x.shape) < 0.3) * rng.normal(0, 0.3, x.shape).astype(np.float32)
    x[rng.random(x.shape) < nan_rate] = np.nan
    return x
