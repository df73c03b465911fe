"""skl2onnx's default classifier export (ZipMap on; string or integer class labels), trained here on scikit-learn's
bundled datasets, built and run by tensorforge and compared with onnxruntime: labels exactly (a numpy array of str
for string labels), ZipMap's list of {class: probability} dicts key by key at rtol 1e-5 — also after save/load.
A ZipMap or string-label output read by another node is refused at parse time, naming the node and zipmap=False."""

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")
pytest.importorskip("skl2onnx")

import onnx  # noqa: E402
import torch  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
from oracle import ort_run  # noqa: E402

import corpus  # noqa: E402
import tensorforge as tfg  # noqa: E402
from tensorforge.api.high_level import Engine, parse  # noqa: E402
from tensorforge.engine import from_bytes  # noqa: E402
from tensorforge.util.errors import UnsupportedOpError  # noqa: E402

NAMES = {"iris": ["setosa", "versicolor", "virginica"], "cancer": ["malignant", "benign"]}


def _model(kind, which, string_labels=True):
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC
    from skl2onnx import to_onnx
    est = {"rf": lambda: RandomForestClassifier(n_estimators=20, max_depth=6, random_state=0),
           "gb": lambda: GradientBoostingClassifier(n_estimators=20, random_state=0),
           "logreg": lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)),
           "svc": lambda: make_pipeline(StandardScaler(), SVC())}[kind]()
    x, y = corpus.data(which)
    labels = np.array(NAMES[which])[y.astype(int)] if string_labels else y.astype(np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(x, labels)
        onx = to_onnx(est, x[:1], target_opset=dict(corpus.ML_OPSET))     # skl2onnx's defaults: zipmap on
    assert "ZipMap" in [n.op_type for n in onx.graph.node]
    return onx.SerializeToString(), x


def assert_same(got: dict, want: dict, what=""):
    """Labels exactly (same dtype: str objects or int64); ZipMap: a list of dicts, same keys, values at rtol 1e-5
    (atol 1e-6: onnxruntime forms 1 − p in float32, so an exact 0 can come out as −1.2e-7)."""
    assert set(got) == {"output_label", "output_probability"}, what
    g, w = got["output_label"], want["output_label"]
    g = g.numpy() if isinstance(g, torch.Tensor) else g             # integer labels of a torch caller: a tensor
    assert isinstance(g, np.ndarray) and g.shape == w.shape and g.dtype == w.dtype, f"{what}labels {g!r} vs {w!r}"
    np.testing.assert_array_equal(g, w, err_msg=f"{what}labels")
    gp, wp = got["output_probability"], want["output_probability"]
    assert isinstance(gp, list) and len(gp) == len(wp), f"{what}ZipMap output is {type(gp).__name__}"
    for i, (a, b) in enumerate(zip(gp, wp)):
        assert isinstance(a, dict) and list(a) == list(b), f"{what}row {i}: keys {list(a)} vs {list(b)}"
        assert all(type(k) is type(kb) for k, kb in zip(a, b)), f"{what}row {i}: key types differ"
        np.testing.assert_allclose([a[k] for k in b], [b[k] for k in b], rtol=1e-5, atol=1e-6,
                                   err_msg=f"{what}row {i}")


CASES = [("rf", "iris", True), ("rf", "cancer", True), ("gb", "iris", True), ("gb", "cancer", True),
         ("logreg", "iris", True), ("logreg", "cancer", True), ("svc", "iris", True), ("rf", "iris", False),
         ("logreg", "cancer", False)]


@pytest.mark.parametrize("kind,which,strings", CASES, ids=[f"{k}_{w}_{'str' if s else 'int'}" for k, w, s in CASES])
def test_default_export_matches_onnxruntime(kind, which, strings):
    onx, x = _model(kind, which, strings)
    want = ort_run(onx, {"X": x})
    engine = tfg.build(onx, device="cpu", shapes={"X": ((1, x.shape[1]), x.shape, x.shape)})
    assert_same(engine.run({"X": x}), want, "built: ")
    assert_same(engine.run({"X": torch.from_numpy(x)}), want, "torch in: ")   # same Python values for torch callers
    reloaded = Engine(from_bytes(engine.serialize()), "cpu")
    assert_same(reloaded.run({"X": x[:7]}), ort_run(onx, {"X": x[:7]}), "reloaded: ")


def test_lightgbm_default_zipmap():
    pytest.importorskip("lightgbm")
    pytest.importorskip("onnxmltools")
    import lightgbm
    from onnxmltools import convert_lightgbm
    from onnxmltools.convert.common.data_types import FloatTensorType
    x, y = corpus.data("iris")
    est = lightgbm.LGBMClassifier(n_estimators=20, num_leaves=7, verbose=-1, random_state=0).fit(x, y)
    onx = convert_lightgbm(est, initial_types=[("X", FloatTensorType([None, 4]))], target_opset=15).SerializeToString()
    want = ort_run(onx, {"X": x})
    got = tfg.build(onx, device="cpu", shapes={"X": ((1, 4), x.shape, x.shape)}).run({"X": x})
    names = list(want)                                      # onnxmltools names the outputs label / probabilities
    assert_same({"output_label": got[names[0]], "output_probability": got[names[1]]},
                {"output_label": want[names[0]], "output_probability": want[names[1]]})


def test_comparison_catches_a_wrong_answer():
    """The oracle check is not vacuous: a swapped pair of probabilities or one wrong label fails it."""
    onx, x = _model("rf", "iris")
    want = ort_run(onx, {"X": x[:10]})
    got = tfg.build(onx, device="cpu", shapes={"X": ((1, 4), (10, 4), (10, 4))}).run({"X": x[:10]})
    row = next(i for i, d in enumerate(got["output_probability"]) if len(set(d.values())) > 1)
    d = got["output_probability"][row]
    k = list(d)
    broken = dict(d, **{k[0]: d[k[1]], k[1]: d[k[0]]})
    with pytest.raises(AssertionError):
        assert_same(dict(got, output_probability=got["output_probability"][:row] + [broken]
                         + got["output_probability"][row + 1:]), want)
    labels = got["output_label"].copy()
    labels[0] = "virginica" if labels[0] != "virginica" else "setosa"
    with pytest.raises(AssertionError):
        assert_same(dict(got, output_label=labels), want)


def test_zipmap_read_by_another_node_is_refused():
    onx, _ = _model("rf", "iris")
    model = onnx.load_from_string(onx)
    zm = next(n for n in model.graph.node if n.op_type == "ZipMap")
    model.graph.node.append(helper.make_node("SequenceLength", [zm.output[0]], ["n"], name="count_rows"))
    model.graph.output.append(helper.make_tensor_value_info("n", TensorProto.INT64, []))
    with pytest.raises(UnsupportedOpError) as e:
        parse(model.SerializeToString())
    msg = str(e.value)
    assert zm.name in msg and "SequenceLength" in msg and "zipmap=False" in msg and "\n" not in msg
