"""compare/comparator.py and compare/data.py: Polygraphy's pass rule, the statistics, and the input feeds."""

import numpy as np
import pytest
from onnx import TensorProto, helper

from tensorforge.compare.comparator import compare_arrays, compare_outputs, histogram
from tensorforge.compare.data import check_feeds, input_specs, load_feeds, make_feeds, parse_shapes, save_feeds
from tensorforge.util.errors import InputError, UsageError


def test_an_element_fails_only_when_it_exceeds_both_tolerances():
    ref = np.array([10.0, 1.0, 0.0, 1e-3], np.float32)
    got = ref + np.array([2e-5, 2e-5, 5e-6, 2e-5], np.float32)
    # abs 2e-5 > atol but rel 2e-6 <= rtol: pass; abs 2e-5 and rel 2e-5: fail; abs 5e-6 <= atol: pass (rel inf)
    c = compare_arrays("y", got, ref, atol=1e-5, rtol=1e-5)
    assert (c.failed, c.total, c.passed) == (2, 4, False)
    d = np.abs(got.astype(np.float64) - ref)
    assert c.worst_index == (int(np.argmax(d)),) and c.worst_got == got[c.worst_index]
    assert c.max_abs == pytest.approx(d.max()) and c.mean_abs == pytest.approx(d.mean())
    assert c.median_abs == pytest.approx(np.median(d))
    rel = [d[0] / 10, d[1] / 1, np.inf, d[3] / 1e-3]
    assert c.max_rel == np.inf and c.median_rel == pytest.approx(np.median(rel))
    assert compare_arrays("y", got, ref, atol=3e-5, rtol=0).passed
    assert compare_arrays("y", got, ref, atol=0, rtol=3e-2).failed == 1          # only the zero reference


def test_nan_inf_shape_and_dtype_rules():
    ref = np.array([np.nan, np.inf, -np.inf, 1.0])
    assert compare_arrays("y", ref.copy(), ref, atol=0, rtol=0).passed
    bad = compare_arrays("y", np.array([1.0, np.inf, np.inf, 1.0]), ref, atol=1, rtol=1)
    assert bad.failed == 2 and bad.abs_hist.infinite == 2
    assert "shape (3,) differs" in compare_arrays("y", np.zeros(3), np.zeros(4)).reason
    assert "dtype float32 differs" in compare_arrays("y", np.zeros(3, np.float32), np.zeros(3)).reason
    assert compare_arrays("b", np.array([True, False]), np.array([True, True])).failed == 1
    missing = compare_outputs({}, {"y": np.zeros(2)})
    assert not missing[0].passed and "did not produce" in missing[0].reason


def test_histogram_counts_every_element():
    values = np.array([0.0, 0.1, 0.2, 0.95, 1.0, np.inf])
    h = histogram(values, bins=4)
    assert h.edges == pytest.approx([0, 0.25, 0.5, 0.75, 1.0]) and h.counts == [3, 0, 0, 2] and h.infinite == 1
    assert len(h.lines()) == 5


def _model():
    graph = helper.make_graph([helper.make_node("Add", ["x", "n"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3]),
                               helper.make_tensor_value_info("n", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph)


def test_feeds_are_seeded_shaped_and_in_range(tmp_path):
    specs = input_specs(_model())
    a = make_feeds(specs, seed=3, val_range=(-2, 5), shapes=parse_shapes("x:4x3"))
    b = make_feeds(specs, seed=3, val_range=(-2, 5), shapes={"x": (4, 3)})
    assert a["x"].shape == (4, 3) and a["x"].dtype == np.float32 and a["n"].dtype == np.int64
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert a["x"].min() >= -2 and a["x"].max() < 5 and set(a["n"].tolist()) <= set(range(-2, 6))
    assert make_feeds(specs, seed=1)["x"].shape == (1, 3)
    save_feeds(tmp_path / "in.npz", a)
    loaded = load_feeds(str(tmp_path / "in.npz"))
    check_feeds(specs, loaded)
    assert all(np.array_equal(a[k], loaded[k]) for k in a)
    np.save(tmp_path / "x.npy", a["x"])
    assert np.array_equal(load_feeds(f"x:{tmp_path / 'x.npy'}")["x"], a["x"])


def test_bad_feeds_and_shapes_are_refused():
    specs = input_specs(_model())
    with pytest.raises(UsageError, match="rank 2"):
        make_feeds(specs, shapes={"x": (4,)})
    with pytest.raises(UsageError, match="static shape"):
        make_feeds(specs, shapes={"x": (4, 3), "n": (3,)})
    with pytest.raises(UsageError, match="not an input"):
        make_feeds(specs, shapes={"z": (1,)})
    with pytest.raises(UsageError, match="cannot read input shape"):
        parse_shapes("x4x3")
    with pytest.raises(InputError, match="lack 'n'"):
        check_feeds(specs, {"x": np.zeros((1, 3), np.float32)})
    with pytest.raises(InputError, match="the model wants float32"):
        check_feeds(specs, {"x": np.zeros((1, 3)), "n": np.zeros(2, np.int64)})
