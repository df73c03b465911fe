"""Shape, indexing and generator ops as single-node models against onnxruntime, old and new opset forms.

Each case: one ONNX node whose data inputs are graph inputs and whose value inputs (shape, axes, pads, k …)
are initializers; tensorforge builds it, runs it, saves/loads the engine and runs again, and every output
must equal onnxruntime's (tests/oracle.py). A last group checks that exporter-style shape arithmetic
(Shape → Gather → Unsqueeze → Concat → Reshape) folds away for static shapes and runs on the host for
dynamic ones. Shapes are tiny.
"""

import numpy as np
import onnx
import pytest
import torch
from onnx import helper, numpy_helper

from oracle import assert_close, check_against_ort, export, ort_run

import tensorforge as tfg
from tensorforge.util.errors import TensorforgeError

rng = np.random.default_rng(0)
F32, I64 = np.float32, np.int64


def randn(*shape):
    return rng.standard_normal(shape).astype(F32)


def node_model(op_type, feeds, consts=None, inputs=None, n_out=1, opset=17, **attrs) -> bytes:
    """One node. feeds/consts: name → array (graph inputs / initializers); `inputs`: the node's input names
    in order ('' = absent; default: feeds then consts). Output types come from ONNX shape inference."""
    consts = consts or {}
    names = inputs if inputs is not None else list(feeds) + list(consts)
    outs = [f"y{i}" for i in range(n_out)]
    graph = helper.make_graph(
        [helper.make_node(op_type, names, outs, **attrs)], f"{op_type}_case",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()],
        [helper.make_empty_tensor_value_info(o) for o in outs],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    del model.graph.value_info[:]
    return model.SerializeToString()


def check(op_type, feeds, consts=None, **kw):
    check_against_ort(node_model(op_type, feeds, consts, **kw), feeds)


X = randn(2, 3, 4)
X1 = randn(3, 1)
I = lambda *v: np.array(v, I64)  # noqa: E731

CASES = {
    # ---- shape family
    "reshape-1-attr": ("Reshape", {"x": X}, {}, dict(opset=4, shape=[4, 6])),
    "reshape-5-zero-minus1": ("Reshape", {"x": X}, {"s": I(0, -1)}, dict(opset=5)),
    "reshape-14-copy-zero": ("Reshape", {"x": X}, {"s": I(4, 0, -1)}, dict(opset=14)),
    "reshape-14-allowzero": ("Reshape", {"x": randn(0, 3)}, {"s": I(3, 0)}, dict(opset=14, allowzero=1)),
    "transpose-default": ("Transpose", {"x": X}, {}, dict(opset=7)),
    "transpose-perm": ("Transpose", {"x": X}, {}, dict(opset=13, perm=[1, 0, 2])),
    "concat-4": ("Concat", {"a": X, "b": randn(2, 1, 4)}, {}, dict(opset=4, axis=1)),
    "concat-13-neg": ("Concat", {"a": X, "b": randn(2, 3, 2), "c": randn(2, 3, 1)}, {}, dict(opset=13, axis=-1)),
    "split-2-attr": ("Split", {"x": X}, {}, dict(opset=7, n_out=2, axis=2, split=[1, 3])),
    "split-11-equal": ("Split", {"x": randn(6, 2)}, {}, dict(opset=11, n_out=3)),
    "split-13-input": ("Split", {"x": X}, {"s": I(2, 1)}, dict(opset=13, n_out=2, axis=1)),
    "split-18-num-outputs": ("Split", {"x": randn(2, 7)}, {}, dict(opset=18, n_out=3, axis=-1, num_outputs=3)),
    "squeeze-11-attr": ("Squeeze", {"x": randn(1, 3, 1, 2)}, {}, dict(opset=11, axes=[0, -2])),
    "squeeze-13-all": ("Squeeze", {"x": randn(1, 3, 1, 2)}, {}, dict(opset=13)),
    "squeeze-13-input": ("Squeeze", {"x": randn(1, 3, 1, 2)}, {"a": I(2)}, dict(opset=13)),
    "unsqueeze-1-attr": ("Unsqueeze", {"x": X}, {}, dict(opset=7, axes=[0, 4])),
    "unsqueeze-13-input": ("Unsqueeze", {"x": X}, {"a": I(-1, 1)}, dict(opset=13)),
    "expand-8": ("Expand", {"x": X1}, {"s": I(2, 1, 4)}, dict(opset=8)),
    "expand-13-bidirectional": ("Expand", {"x": randn(2, 1, 3)}, {"s": I(1, 4, 1)}, dict(opset=13)),
    "shape-13": ("Shape", {"x": X}, {}, dict(opset=13)),
    "shape-15-start": ("Shape", {"x": X}, {}, dict(opset=15, start=1)),
    "shape-15-neg": ("Shape", {"x": X}, {}, dict(opset=15, start=-2, end=-1)),
    "shape-19-clamp": ("Shape", {"x": X}, {}, dict(opset=19, start=-9, end=10)),
    "size-13": ("Size", {"x": X}, {}, dict(opset=13)),
    "tile-13": ("Tile", {"x": X1}, {"r": I(2, 3)}, dict(opset=13)),
    "tile-6-int": ("Tile", {"x": I(1, 2, 3)}, {"r": I(2)}, dict(opset=7)),
    "pad-2-attr": ("Pad", {"x": X}, {}, dict(opset=7, pads=[0, 1, 2, 0, 0, 1], value=1.5)),
    "pad-2-edge": ("Pad", {"x": X}, {}, dict(opset=7, mode="edge", pads=[0, 2, 1, 0, 1, 3])),
    "pad-11-reflect": ("Pad", {"x": X}, {"p": I(0, 2, 3, 0, 1, 3)}, dict(opset=11, mode="reflect")),
    "pad-13-value": ("Pad", {"x": X}, {"p": I(1, 0, 0, 0, 0, 2), "v": np.array(-2.0, F32)}, dict(opset=13)),
    "pad-13-crop": ("Pad", {"x": X}, {"p": I(0, -1, 1, 0, 0, -2)}, dict(opset=13)),
    "pad-18-axes": ("Pad", {"x": X}, {"p": I(1, 2, 0, 1), "v": np.array(0.5, F32), "a": I(-1, 0)},
                    dict(opset=18, inputs=["x", "p", "v", "a"])),
    "pad-19-wrap": ("Pad", {"x": X}, {"p": I(2, 1, 1, 3), "a": I(1, 2)}, dict(opset=19, mode="wrap",
                                                                             inputs=["x", "p", "", "a"])),
    # ---- indexing
    "gather-1": ("Gather", {"x": X}, {"i": I(2, 0)}, dict(opset=7, axis=1)),
    "gather-13-neg-2d": ("Gather", {"x": X}, {"i": I([-1, 0], [1, -2])}, dict(opset=13, axis=-1)),
    "gather-13-scalar": ("Gather", {"x": X}, {"i": np.array(-1, I64)}, dict(opset=13)),
    "gather-elements-13": ("GatherElements", {"x": X}, {"i": I([[0, -1, 2, 1]] * 3, [[2, 2, 0, -3]] * 3)},
                           dict(opset=13, axis=1)),
    "gather-nd-11": ("GatherND", {"x": X}, {"i": I([0, 2], [1, -1])}, dict(opset=11)),
    "gather-nd-12-batch": ("GatherND", {"x": X}, {"i": I([[2, 3]], [[0, 1]])}, dict(opset=12, batch_dims=1)),
    "gather-nd-13-full": ("GatherND", {"x": X}, {"i": I([[0, 1, 2]], [[1, 2, 3]])}, dict(opset=13)),
    "scatter-nd-11": ("ScatterND", {"x": X, "u": randn(2, 4)}, {"i": I([1, 2], [0, 0])}, dict(opset=11, inputs=["x", "i", "u"])),
    "scatter-nd-16-add": ("ScatterND", {"x": X, "u": randn(3, 3, 4)}, {"i": I([1], [0], [1])},
                          dict(opset=16, reduction="add", inputs=["x", "i", "u"])),
    "scatter-nd-16-mul": ("ScatterND", {"x": X, "u": randn(2, 4)}, {"i": I([1, 2], [1, 2])},
                          dict(opset=16, reduction="mul", inputs=["x", "i", "u"])),
    "scatter-nd-18-max": ("ScatterND", {"x": X, "u": randn(2, 4)}, {"i": I([1, 2], [0, 1])},
                          dict(opset=18, reduction="max", inputs=["x", "i", "u"])),
    "scatter-nd-18-min": ("ScatterND", {"x": X, "u": randn(2, 4)}, {"i": I([0, 2], [0, 1])},
                          dict(opset=18, reduction="min", inputs=["x", "i", "u"])),
    "scatter-9": ("Scatter", {"x": X, "u": randn(2, 3, 2)}, {"i": I([[1, 3]] * 3, [[0, 2]] * 3)},
                  dict(opset=9, axis=2, inputs=["x", "i", "u"])),
    "scatter-elements-11": ("ScatterElements", {"x": X, "u": randn(2, 1, 4)}, {"i": np.array([[[2, -1, 0, 1]]] * 2, I64)},
                            dict(opset=11, axis=1, inputs=["x", "i", "u"])),
    "scatter-elements-16-add": ("ScatterElements", {"x": X, "u": randn(2, 2, 4)}, {"i": np.ones((2, 2, 4), I64)},
                                dict(opset=16, axis=1, reduction="add", inputs=["x", "i", "u"])),
    "scatter-elements-18-max": ("ScatterElements", {"x": X, "u": randn(2, 2, 4)}, {"i": np.zeros((2, 2, 4), I64)},
                                dict(opset=18, axis=1, reduction="max", inputs=["x", "i", "u"])),
    "slice-1-attr": ("Slice", {"x": X}, {}, dict(opset=7, starts=[1, -3], ends=[100, -1], axes=[1, 2])),
    "slice-10-steps": ("Slice", {"x": X}, {"s": I(0, 3), "e": I(3, 0), "a": I(1, 2), "t": I(2, -1)}, dict(opset=10)),
    "slice-13-neg-step": ("Slice", {"x": randn(9, 2)}, {"s": I(-1), "e": I(-(2**63)), "a": I(0), "t": I(-3)},
                          dict(opset=13)),
    "slice-13-no-axes": ("Slice", {"x": X}, {"s": I(1, -10), "e": I(2**62, 2)}, dict(opset=13)),
    "slice-13-empty": ("Slice", {"x": X}, {"s": I(3), "e": I(1), "a": I(-1)}, dict(opset=13)),
    "slice-13-steps-no-axes": ("Slice", {"x": X}, {"s": I(2), "e": I(0), "t": I(-1)},
                               dict(opset=13, inputs=["x", "s", "e", "", "t"])),
    "compress-9-axis": ("Compress", {"x": X}, {"c": np.array([True, False, True])}, dict(opset=9, axis=1)),
    "compress-11-flat-short": ("Compress", {"x": X}, {"c": np.array([0, 1, 1, 0, 1], bool)}, dict(opset=11)),
    "reverse-sequence-default": ("ReverseSequence", {"x": randn(4, 3, 2)}, {"l": I(4, 1, 2)}, dict(opset=10)),
    "reverse-sequence-batch0": ("ReverseSequence", {"x": randn(3, 4)}, {"l": I(1, 2, 4)},
                                dict(opset=10, batch_axis=0, time_axis=1)),
    "topk-1-attr": ("TopK", {"x": X}, {}, dict(opset=7, n_out=2, k=2)),
    "topk-10-input": ("TopK", {"x": X}, {"k": I(3)}, dict(opset=10, n_out=2, axis=1)),
    "topk-11-smallest-ties": ("TopK", {"x": np.array([[3, 1, 2, 1, 3, 2]], F32)}, {"k": I(4)},
                              dict(opset=11, n_out=2, largest=0)),
    "topk-11-largest-ties": ("TopK", {"x": np.array([[3, 1, 2, 1, 3, 2]], F32)}, {"k": I(3)},
                             dict(opset=11, n_out=2)),
    "nonzero-13": ("NonZero", {"x": np.array([[0, 1, 0], [2, 0, 3]], F32)}, {}, dict(opset=13)),
    # ---- generators and scans
    "constant-of-shape-default": ("ConstantOfShape", {}, {"s": I(2, 3)}, dict(opset=9)),
    "constant-of-shape-int": ("ConstantOfShape", {}, {"s": I(3, 1)}, dict(opset=20, value=numpy_helper.from_array(I(7)))),
    "range-11-int": ("Range", {}, {"a": np.array(10, I64), "b": np.array(-3, I64), "c": np.array(-4, I64)}, dict(opset=11)),
    "range-11-float": ("Range", {}, {"a": np.array(0.5, F32), "b": np.array(2.0, F32), "c": np.array(0.3, F32)},
                       dict(opset=11)),
    "range-27-int32": ("Range", {}, {"a": np.array(1, np.int32), "b": np.array(8, np.int32), "c": np.array(3, np.int32)},
                       dict(opset=27)),
    "eye-like-9": ("EyeLike", {"x": randn(3, 4)}, {}, dict(opset=9, k=1)),
    "eye-like-22-dtype": ("EyeLike", {"x": randn(4, 3)}, {}, dict(opset=22, k=-1, dtype=onnx.TensorProto.INT64)),
    "one-hot-11": ("OneHot", {"i": I([0, -1], [5, 2])}, {"d": np.array(4, I64), "v": np.array([-1, 2], F32)},
                   dict(opset=11)),
    "one-hot-11-float-axis0": ("OneHot", {"i": np.array([1.7, 0, -1.2], F32)}, {"d": np.array([3.0], F32),
                                                                             "v": np.array([0, 5], F32)}, dict(opset=11, axis=0)),
    "trilu-upper": ("Trilu", {"x": randn(2, 3, 4)}, {}, dict(opset=14)),
    "trilu-lower-k": ("Trilu", {"x": randn(4, 3)}, {"k": np.array(-1, I64)}, dict(opset=14, upper=0)),
    "trilu-upper-k": ("Trilu", {"x": randn(3, 5)}, {"k": np.array(2, I64)}, dict(opset=14)),
    "cumsum-11": ("CumSum", {"x": X}, {"a": np.array(1, I64)}, dict(opset=11)),
    "cumsum-14-excl-rev": ("CumSum", {"x": X}, {"a": np.array(-1, np.int32)}, dict(opset=14, exclusive=1, reverse=1)),
    "cumsum-14-int-excl": ("CumSum", {"x": I([1, 2, 3], [4, 5, 6])}, {"a": np.array(0, I64)}, dict(opset=14, exclusive=1)),
    "tensor-scatter-linear": ("TensorScatter", {"p": randn(2, 3, 5, 2), "u": randn(2, 3, 2, 2)},
                              {"w": I(0, 3)}, dict(opset=24)),
    "tensor-scatter-circular": ("TensorScatter", {"p": randn(2, 5, 3), "u": randn(2, 3, 3)}, {"w": I(1, 4)},
                                dict(opset=24, mode="circular", axis=1)),
    "tensor-scatter-no-indices": ("TensorScatter", {"p": randn(2, 4, 3), "u": randn(2, 2, 3)}, {}, dict(opset=24)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_single_node_matches_onnxruntime(case):
    op_type, feeds, consts, kw = CASES[case]
    check(op_type, feeds, consts, **kw)


# ---- value inputs known only from shapes: exporter-style shape arithmetic ------------------------------
def _shape_arith_model(opset=13) -> bytes:
    """y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])), the pattern torch.onnx emits for
    x.view(x.size(0), -1), then Expand(Range(0, Shape(x)[1], 1)) to (batch, seq) as position ids."""
    c = lambda name, v: helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(v), name))  # noqa: E731
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        c("i0", np.array(0, I64)), c("i1", np.array(1, I64)), c("m1", I(-1)), c("ax", I(0)), c("one", np.array(1, I64)),
        helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
        helper.make_node("Unsqueeze", ["b", "ax"], ["bu"]),
        helper.make_node("Concat", ["bu", "m1"], ["shape2"], axis=0),
        helper.make_node("Reshape", ["x", "shape2"], ["flat"]),
        helper.make_node("Gather", ["s", "i1"], ["seq"], axis=0),
        helper.make_node("Range", ["i0", "seq", "one"], ["pos"]),
        c("c2", I(2)),
        helper.make_node("Slice", ["s", "ax", "c2"], ["bs"]),
        helper.make_node("Expand", ["pos", "bs"], ["pos_ids"]),
    ]
    graph = helper.make_graph(nodes, "shape_arith", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["b", "s", 3])],
                              [helper.make_tensor_value_info("flat", onnx.TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("pos_ids", onnx.TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model.SerializeToString()


def test_shape_arithmetic_folds_for_static_shapes():
    engine = tfg.build(_shape_arith_model(), shapes={"x": (2, 5, 3)}, device="cpu")
    ops = sorted(layer.op for layer in engine.data.layers)
    assert ops == ["Identity", "Reshape"], ops    # position ids fold to a constant; only the data reshape runs
    x = randn(2, 5, 3)
    assert_close(engine.run({"x": x}), ort_run(_shape_arith_model(), {"x": x}))


def test_shape_arithmetic_runs_on_host_for_dynamic_shapes(tmp_path):
    model = _shape_arith_model()
    engine = tfg.build(model, shapes={"x": ((1, 1, 3), (2, 4, 3), (4, 8, 3))}, device="cpu")
    placement = {layer.op: layer.placement for layer in engine.data.layers}
    assert placement["Reshape"] == "device"
    assert all(placement[o] == "host" for o in ("Shape", "Gather", "Concat", "Range", "Expand"))
    engine.save(tmp_path / "m.engine")
    reloaded = tfg.load(tmp_path / "m.engine", device="cpu")
    for shape in ((1, 1, 3), (3, 7, 3), (4, 8, 3)):
        x = randn(*shape)
        want = ort_run(model, {"x": x})
        assert_close(engine.run({"x": x}), want)
        assert_close(reloaded.run({"x": x}), want)


# ---- values known only at run time --------------------------------------------------------------------
class _MaskSelect(torch.nn.Module):
    def forward(self, x):
        y = x[x > 0]                                   # exports as NonZero → Transpose → GatherND
        return y * 2, torch.tensor(y.shape[0]).reshape(1) + 0


def test_nonzero_count_is_dynamic_and_runs():
    """NonZero's count depends on the data: the engine records it as -1 and computes it at run time, and
    Shape of the selection is not folded to the build-time placeholder."""
    model = export(_MaskSelect(), (torch.randn(3, 4),), opset=17, input_names=["x"])
    engine = tfg.build(model, device="cpu")
    nz = next(layer for layer in engine.data.layers if layer.op == "NonZero")
    assert engine.data.tensors[nz.outputs[0]].shape[-1] == -1
    counts = set()
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((3, 4)).astype(F32)
        x[0, :seed] = -1.0
        got = engine.run({"x": x})
        assert_close(got, ort_run(model, {"x": x}))
        counts.add(int(np.asarray(list(got.values())[1]).reshape(-1)[0]))
    assert len(counts) > 1, "the test inputs should select different counts"


def test_range_from_runtime_scalars():
    """Range whose bounds are network inputs: its length is only known at run time."""
    model = node_model("Range", {"a": np.array(0, I64), "b": np.array(4, I64), "c": np.array(1, I64)})
    engine = tfg.build(model, device="cpu")
    for lo, hi, step in ((0, 4, 1), (5, -6, -3), (2, 2, 1)):
        feeds = {"a": torch.tensor(lo), "b": torch.tensor(hi), "c": torch.tensor(step)}
        want = ort_run(model, {k: v.numpy() for k, v in feeds.items()})
        assert_close({k: v.numpy() for k, v in engine.run(feeds).items()}, want)


@pytest.mark.parametrize("op_type,feeds,consts,kw,needle", [
    ("Squeeze", {"x": X}, {"a": I(1)}, dict(opset=13), "Squeeze axis 1 has size 3"),
    ("Reshape", {"x": X}, {"s": I(5, -1)}, dict(opset=13), "Reshape"),
    ("TopK", {"x": X}, {"k": I(9)}, dict(opset=11, n_out=2), "TopK k=9"),
])
def test_bad_values_fail_at_build_with_the_layer_named(op_type, feeds, consts, kw, needle):
    """Built without ONNX shape inference (which would reject these models first)."""
    node = helper.make_node(op_type, list(feeds) + list(consts), [f"y{i}" for i in range(kw.get("n_out", 1))])
    graph = helper.make_graph([node], "bad", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, X.shape)],
                              [helper.make_empty_tensor_value_info(o) for o in node.output],
                              initializer=[numpy_helper.from_array(v, k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", kw["opset"])])
    with pytest.raises(TensorforgeError) as info:
        tfg.build(model.SerializeToString(), device="cpu")
    assert needle in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("axis", [1, None])
def test_compress_with_runtime_condition(axis):
    """A condition fed at run time: the output length follows the data, as in onnxruntime."""
    x = randn(3, 4)
    model = node_model("Compress", {"x": x, "c": np.array([1, 0, 1, 1], bool)}, opset=11,
                       **({} if axis is None else {"axis": axis}))
    engine = tfg.build(model, device="cpu")
    for cond in ([1, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]):
        feeds = {"x": x, "c": np.array(cond, bool)}
        assert_close(engine.run(feeds), ort_run(model, feeds))
