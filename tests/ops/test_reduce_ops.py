"""Reductions (Reduce*, ArgMax, ArgMin) as single-node models against onnxruntime.

Covers both ONNX forms (axes as attribute before ReduceSum-13 / Reduce*-18, as input after), keepdims,
noop_with_empty_axes, reduce-all, negative axes, integer inputs and select_last_index with ties. Every
case builds, runs, saves/loads and runs again, compared with onnxruntime (tests/oracle.py).
"""

import numpy as np
import pytest

from ops.test_shape_ops import check  # the same one-node model builder and oracle

rng = np.random.default_rng(1)
X = rng.standard_normal((2, 3, 4)).astype(np.float32)
POS = (np.abs(X) + 0.5).astype(np.float32)          # LogSum needs a positive sum
XI = rng.integers(-5, 6, (2, 3, 4)).astype(np.int64)

REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]
INPUT_FORM = {"ReduceSum": 13}                       # first version that takes axes as an input; others 18


def _data(op):
    return POS if op == "ReduceLogSum" else X


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_axes_attribute_form(op, keepdims):
    check(op, {"x": _data(op)}, opset=11, axes=[0, -1], keepdims=keepdims)


@pytest.mark.parametrize("op", REDUCE)
def test_axes_attribute_absent_reduces_all(op):
    check(op, {"x": _data(op)}, opset=7, keepdims=0)


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_axes_input_form(op, keepdims):
    check(op, {"x": _data(op)}, {"axes": np.array([1], np.int64)}, opset=INPUT_FORM.get(op, 18), keepdims=keepdims)


@pytest.mark.parametrize("op", REDUCE)
def test_axes_input_absent_reduces_all(op):
    check(op, {"x": _data(op)}, opset=INPUT_FORM.get(op, 18))


@pytest.mark.parametrize("op", REDUCE)
def test_noop_with_empty_axes(op):
    check(op, {"x": _data(op)}, {"axes": np.zeros(0, np.int64)}, opset=INPUT_FORM.get(op, 18), noop_with_empty_axes=1)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                                "ReduceSumSquare"])
def test_integer_inputs(op):
    check(op, {"x": XI}, {"axes": np.array([-2], np.int64)}, opset=INPUT_FORM.get(op, 18), keepdims=0)


def test_reduce_max_bool_opset20():
    b = rng.integers(0, 2, (3, 4)).astype(bool)
    check("ReduceMax", {"x": b}, {"axes": np.array([1], np.int64)}, opset=20)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("opset,attrs", [(7, {}), (11, {"axis": -1, "keepdims": 0}),
                                         (12, {"axis": 1, "select_last_index": 1}),
                                         (13, {"axis": 2, "keepdims": 0, "select_last_index": 1})])
def test_arg_reductions_with_ties(op, opset, attrs):
    ties = rng.integers(0, 3, (2, 3, 4)).astype(np.float32)     # many equal values: first vs last index matters
    check(op, {"x": ties}, opset=opset, **attrs)
