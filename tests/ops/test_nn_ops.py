"""NN ops (conv, pool, norm, linalg, softmax family, resize, …) as single-node models against onnxruntime.

Every case builds a one-node ONNX model, runs it through tensorforge (build → run → save/load → run) and
compares with onnxruntime (tests/oracle.py). Shapes are tiny; attribute combinations cover the subtle ONNX
rules (SAME padding, ceil_mode, count_include_pad, coordinate modes, opset-dependent softmax axes).
"""

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from oracle import FLOAT, INT64, assert_close, check_against_ort, ort_run, single_node_model

import tensorforge as tfg
from tensorforge.util.errors import TensorforgeError

rng = np.random.default_rng(0)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def make_case(op_type, x, params=(), opset=17, outputs=(("y", FLOAT),), **attrs) -> bytes:
    """One node: input x plus initializer params [(name, array), or ('', None) for an absent input]."""
    names = ["x"] + [n for n, _ in params]
    inits = [init(n, a) for n, a in params if n]
    return single_node_model(op_type, [("x", FLOAT, list(x.shape))], [(n, t, None) for n, t in outputs],
                             opset=opset, initializers=inits, node_inputs=names, **attrs)


def run_case(op_type, x_shape, params=(), opset=17, x=None, **kw):
    x = randn(*x_shape) if x is None else x
    check_against_ort(make_case(op_type, x, params, opset, **kw), {"x": x})


def check_type_only_version(op_type, x, params, new_opset, old_opset, **kw):
    """For a version onnxruntime lacks whose schema differs from an older one only in allowed types (checked
    here against onnx.defs): tensorforge at `new_opset` must equal onnxruntime at `old_opset`."""
    new, old = onnx.defs.get_schema(op_type, new_opset), onnx.defs.get_schema(op_type, old_opset)
    assert new.since_version != old.since_version and new.doc == old.doc
    assert {k: str(v) for k, v in new.attributes.items()} == {k: str(v) for k, v in old.attributes.items()}
    want = ort_run(make_case(op_type, x, params, old_opset, **kw), {"x": x})
    got = tfg.build(make_case(op_type, x, params, new_opset, **kw), device="cpu").run({"x": x})
    assert_close(got, want)


# ---- conv ------------------------------------------------------------------------------------------
CONV_CASES = [
    # x shape, w shape, attrs
    ((1, 2, 7), (3, 2, 3), {}),
    ((1, 2, 7), (3, 2, 3), {"strides": [2], "pads": [1, 2]}),
    ((1, 4, 6, 5), (6, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    ((1, 4, 6, 5), (4, 1, 3, 3), {"group": 4, "strides": [2, 1], "dilations": [1, 2], "pads": [0, 2, 1, 1]}),
    ((2, 3, 7, 6), (2, 3, 3, 2), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((2, 3, 7, 6), (2, 3, 3, 2), {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    ((2, 3, 6, 6), (2, 3, 2, 2), {"auto_pad": "SAME_LOWER"}),
    ((2, 3, 7, 6), (2, 3, 3, 3), {"auto_pad": "VALID", "strides": [2, 2], "dilations": [2, 1]}),
    ((1, 2, 4, 5, 3), (2, 2, 2, 3, 1), {"pads": [1, 0, 0, 0, 1, 0], "strides": [1, 2, 1]}),
]


@pytest.mark.parametrize("opset", [7, 22])
@pytest.mark.parametrize("x_shape,w_shape,attrs", CONV_CASES)
def test_conv(x_shape, w_shape, attrs, opset):
    bias = [("b", randn(w_shape[0]))] if len(x_shape) != 3 else []
    run_case("Conv", x_shape, [("w", randn(*w_shape))] + bias, opset=opset, **attrs)


CONV_T_CASES = [
    ((1, 2, 4), (2, 3, 3), {}),
    ((1, 2, 4), (2, 3, 3), {"strides": [2], "output_padding": [1]}),
    ((1, 2, 3, 4), (2, 2, 3, 3), {"strides": [2, 2], "pads": [1, 0, 1, 0]}),
    ((1, 2, 3, 4), (2, 2, 3, 3), {"strides": [2, 2], "pads": [0, 1, 2, 0], "output_padding": [1, 1]}),
    ((1, 4, 3, 3), (4, 1, 3, 3), {"group": 2, "strides": [2, 1], "dilations": [1, 2]}),
    ((1, 2, 3, 4), (2, 3, 3, 2), {"strides": [2, 3], "output_shape": [8, 11]}),
    ((1, 2, 3, 4), (2, 3, 3, 2), {"strides": [2, 2], "output_shape": [7, 8], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 3, 4), (2, 3, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 3, 4), (2, 3, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 2, 3, 2), (2, 1, 2, 2, 2), {"strides": [2, 1, 2], "pads": [1, 0, 0, 0, 1, 1]}),
]


@pytest.mark.parametrize("opset", [9, 22])
@pytest.mark.parametrize("x_shape,w_shape,attrs", CONV_T_CASES)
def test_conv_transpose(x_shape, w_shape, attrs, opset):
    bias = [("b", randn(w_shape[1] * attrs.get("group", 1)))]
    run_case("ConvTranspose", x_shape, [("w", randn(*w_shape))] + bias, opset=opset, **attrs)


# ---- pooling ---------------------------------------------------------------------------------------
POOL_CASES = [
    ((1, 2, 7), {"kernel_shape": [3]}),
    ((1, 2, 7), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    ((1, 2, 7, 6), {"kernel_shape": [3, 3], "strides": [2, 2]}),
    ((1, 2, 7, 6), {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1]}),
    ((1, 2, 7, 6), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 6, 6), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    ((1, 2, 5, 5), {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    ((1, 2, 7, 6), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 7, 6), {"kernel_shape": [2, 3], "strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 7, 6), {"kernel_shape": [3, 3], "auto_pad": "VALID", "strides": [1, 2]}),
    ((1, 2, 3, 4, 5), {"kernel_shape": [2, 2, 2], "strides": [1, 2, 2], "pads": [0, 1, 0, 1, 0, 1]}),
]
DILATED = [
    ((1, 2, 7, 6), {"kernel_shape": [2, 2], "dilations": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 8, 7), {"kernel_shape": [3, 2], "dilations": [2, 1], "strides": [2, 2], "ceil_mode": 1}),
]


@pytest.mark.parametrize("opset", [10, 22])
@pytest.mark.parametrize("x_shape,attrs", POOL_CASES + DILATED)
def test_max_pool(x_shape, attrs, opset):
    run_case("MaxPool", x_shape, opset=opset, **attrs)


@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize("x_shape,attrs", [POOL_CASES[1], POOL_CASES[3], POOL_CASES[5], POOL_CASES[8],
                                            POOL_CASES[10], DILATED[1]])
def test_max_pool_indices(x_shape, attrs, storage_order):
    run_case("MaxPool", x_shape, opset=12, outputs=(("y", FLOAT), ("indices", INT64)), storage_order=storage_order, **attrs)


def test_max_pool_opset7_no_ceil_attrs():
    run_case("MaxPool", (1, 2, 6, 5), opset=7, kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1])


@pytest.mark.parametrize("count_include_pad", [0, 1])
@pytest.mark.parametrize("x_shape,attrs", POOL_CASES)
def test_average_pool(x_shape, attrs, count_include_pad):
    run_case("AveragePool", x_shape, opset=11, count_include_pad=count_include_pad, **attrs)


@pytest.mark.parametrize("count_include_pad", [0, 1])
@pytest.mark.parametrize("x_shape,attrs", DILATED)
def test_average_pool_dilated(x_shape, attrs, count_include_pad):
    run_case("AveragePool", x_shape, opset=19, count_include_pad=count_include_pad, **attrs)


@pytest.mark.parametrize("opset,x_shape,attrs", [(11, *POOL_CASES[3]), (11, *POOL_CASES[7]), (18, *POOL_CASES[5]),
                                                 (18, *DILATED[0]), (22, *POOL_CASES[1])])
@pytest.mark.parametrize("p", [1, 2, 3])
def test_lp_pool(opset, x_shape, attrs, p):
    run_case("LpPool", x_shape, opset=opset, p=p, **attrs)


@pytest.mark.parametrize("op_type", ["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"])
@pytest.mark.parametrize("x_shape", [(2, 3, 5), (1, 2, 3, 4), (1, 2, 2, 3, 2)])
@pytest.mark.parametrize("opset", [7, 22])
def test_global_pools(op_type, x_shape, opset):
    attrs = {"p": 3} if op_type == "GlobalLpPool" else {}
    if op_type == "GlobalLpPool" and opset == 22:       # onnxruntime has no GlobalLpPool-22 kernel
        check_type_only_version(op_type, randn(*x_shape), (), 22, 18, **attrs)
        return
    run_case(op_type, x_shape, opset=opset, **attrs)


# ---- normalisation ---------------------------------------------------------------------------------
def bn_params(c, extra=()):
    shape = (c, *extra)
    return [("scale", randn(*shape)), ("b", randn(*shape)), ("mean", randn(*shape)),
            ("var", rng.uniform(0.5, 2, shape).astype(np.float32))]


@pytest.mark.parametrize("opset", [7, 9, 14, 15])
@pytest.mark.parametrize("x_shape", [(2, 3), (2, 3, 5), (1, 3, 4, 5), (1, 2, 2, 3, 2)])
def test_batch_norm(x_shape, opset):
    run_case("BatchNormalization", x_shape, bn_params(x_shape[1]), opset=opset, epsilon=1e-3)


def test_batch_norm_7_per_activation():
    """spatial=0: parameters of shape (C, H, W), normalising each activation on its own."""
    run_case("BatchNormalization", (2, 3, 2, 4), bn_params(3, (2, 4)), opset=7, spatial=0)


def test_batch_norm_training_mode_is_refused():
    model = make_case("BatchNormalization", randn(1, 3, 2, 2), bn_params(3), opset=15, training_mode=1)
    with pytest.raises(TensorforgeError, match="training_mode=1"):
        tfg.build(model, device="cpu")


@pytest.mark.parametrize("opset", [6, 22])
@pytest.mark.parametrize("x_shape", [(2, 3, 5), (1, 3, 4, 5)])
def test_instance_norm(x_shape, opset):
    params = [("scale", randn(x_shape[1])), ("b", randn(x_shape[1]))]
    if opset == 22:     # onnxruntime has no InstanceNormalization-22 kernel: same schema as 6 but for bfloat16
        check_type_only_version("InstanceNormalization", randn(*x_shape), params, 22, 6, epsilon=1e-3)
        return
    run_case("InstanceNormalization", x_shape, params, opset=opset, epsilon=1e-3)


@pytest.mark.parametrize("axis,bias,stats", [(-1, True, False), (-1, False, False), (1, True, True),
                                             (-2, True, True), (0, True, True)])
def test_layer_norm(axis, bias, stats):
    x_shape = (2, 3, 4)
    norm_shape = x_shape[axis:]
    params = [("scale", randn(*norm_shape))] + ([("b", randn(*norm_shape))] if bias else [])
    outputs = (("y", FLOAT), ("mean", FLOAT), ("inv_std", FLOAT)) if stats else (("y", FLOAT),)
    run_case("LayerNormalization", x_shape, params, opset=17, outputs=outputs, axis=axis, epsilon=1e-3)


@pytest.mark.parametrize("opset,groups,x_shape", [(18, 2, (2, 4, 3)), (18, 4, (1, 4, 2, 3)), (21, 2, (2, 4, 3)),
                                                  (21, 1, (1, 6, 2, 2)), (21, 3, (2, 6, 2, 2))])
def test_group_norm(opset, groups, x_shape):
    n = groups if opset == 18 else x_shape[1]
    run_case("GroupNormalization", x_shape, [("scale", randn(n)), ("b", randn(n))], opset=opset,
             num_groups=groups, epsilon=1e-3)


@pytest.mark.parametrize("opset", [7, 22])
@pytest.mark.parametrize("axis,p", [(-1, 2), (1, 1), (0, 2)])
def test_lp_normalization(opset, axis, p):
    x = randn(3, 4, 2)
    x[1, :, 0] = 0          # a zero vector along axis 1: ONNX defines the output as 0
    if opset == 22:         # onnxruntime has no LpNormalization-22 kernel
        check_type_only_version("LpNormalization", x, (), 22, 7, axis=axis, p=p)
        return
    run_case("LpNormalization", x.shape, opset=opset, x=x, axis=axis, p=p)


@pytest.mark.parametrize("opset", [9, 13])
@pytest.mark.parametrize("x_shape,axes", [((2, 3, 4, 5), None), ((2, 3, 4), [1, 2]), ((2, 3, 4, 2), [0, 1, 2, 3])])
def test_mean_variance_normalization(opset, x_shape, axes):
    run_case("MeanVarianceNormalization", x_shape, opset=opset, **({"axes": axes} if axes else {}))


def lrn_from_spec(x, size, alpha, beta, bias):
    """ONNX's LRN formula written out channel by channel (the oracle where no runtime implements the case)."""
    c = x.shape[1]
    y = np.empty_like(x)
    for ch in range(c):
        lo, hi = max(0, ch - (size - 1) // 2), min(c - 1, ch + int(np.ceil((size - 1) / 2)))
        square_sum = (x[:, lo:hi + 1] ** 2).sum(axis=1)
        y[:, ch] = x[:, ch] / (bias + alpha / size * square_sum) ** beta
    return y


@pytest.mark.parametrize("opset", [7, 13])
@pytest.mark.parametrize("size,x_shape", [(3, (1, 5, 2, 3)), (4, (1, 6, 3, 2)), (2, (2, 3, 4)), (5, (1, 7, 2, 2, 2))])
def test_lrn(opset, size, x_shape):
    """onnxruntime implements odd sizes on 4-D inputs only, and onnx.reference's LRN loops over the batch
    instead of the channels; other cases use the spec formula, itself checked against onnxruntime here."""
    attrs = {"size": size, "alpha": 0.3, "beta": 0.7, "bias": 1.5}
    x = randn(*x_shape)
    if size % 2 == 1 and len(x_shape) == 4:
        np.testing.assert_allclose(lrn_from_spec(x, **attrs), ort_run(make_case("LRN", x, (), opset, **attrs),
                                                                       {"x": x})["y"], rtol=1e-5, atol=1e-6)
        run_case("LRN", x_shape, x=x, opset=opset, **attrs)
        return
    got = tfg.build(make_case("LRN", x, (), opset, **attrs), device="cpu").run({"x": x})["y"]
    np.testing.assert_allclose(got, lrn_from_spec(x, **attrs), rtol=1e-5, atol=1e-6)


# ---- linear algebra --------------------------------------------------------------------------------
def run_multi(op_type, arrays, opset, **attrs):
    """A node whose inputs are all graph inputs (x0, x1, ...)."""
    names = [f"x{i}" for i in range(len(arrays))]
    model = single_node_model(op_type, [(n, FLOAT, list(a.shape)) for n, a in zip(names, arrays)],
                              [("y", FLOAT, None)], opset=opset, **attrs)
    check_against_ort(model, dict(zip(names, arrays)))


@pytest.mark.parametrize("opset", [7, 13])
@pytest.mark.parametrize("a,b", [((3, 4), (4, 5)), ((4,), (4, 2)), ((2, 3, 4), (4,)), ((2, 1, 3, 4), (3, 4, 2)),
                                 ((4,), (4,))])
def test_matmul(a, b, opset):
    run_multi("MatMul", [randn(*a), randn(*b)], opset)


@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("opset,c_shape", [(7, (3, 5)), (7, (5,)), (11, (1,)), (11, (3, 1)), (11, None), (13, (5,)),
                                           (13, None)])
def test_gemm(opset, trans_a, trans_b, c_shape):
    a = randn(4, 3) if trans_a else randn(3, 4)
    b = randn(5, 4) if trans_b else randn(4, 5)
    params = [("b", b)] + ([("c", randn(*c_shape))] if c_shape else [])
    run_case("Gemm", a.shape, params, opset=opset, x=a, alpha=0.5, beta=2.0, transA=trans_a, transB=trans_b)


EINSUM = [("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("bij, bjk -> bik", [(2, 2, 3), (2, 3, 2)]),
          ("ii->i", [(3, 3)]), ("ii", [(3, 3)]), ("ij->ji", [(2, 3)]), ("...ij,...jk->...ik", [(2, 2, 3), (2, 3, 2)]),
          ("...j,j", [(2, 3, 4), (4,)]), ("Ab,bc->Ac", [(2, 3), (3, 2)]), ("bA,Ac", [(2, 3), (3, 2)]),
          ("i,j->ij", [(2,), (3,)]), ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)])]


@pytest.mark.parametrize("opset", [12, 28])
@pytest.mark.parametrize("equation,shapes", EINSUM)
def test_einsum(equation, shapes, opset):
    run_multi("Einsum", [randn(*s) for s in shapes], opset, equation=equation)


# ---- softmax family --------------------------------------------------------------------------------
def run_unshaped(op_type, x, opset, **attrs):
    """The input's shape is left out of the model, so the importer cannot see the rank."""
    model = single_node_model(op_type, [("x", FLOAT, None)], [("y", FLOAT, None)], opset=opset, **attrs)
    check_against_ort(model, {"x": x}, shapes={"x": x.shape})


@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("opset,axis", [(7, None), (7, 0), (7, 2), (11, -1), (11, -2), (11, 1), (13, None),
                                        (13, 0), (13, 1), (13, -2)])
@pytest.mark.parametrize("shaped", [True, False])
def test_softmax_family(op_type, opset, axis, shaped):
    x = randn(2, 3, 4)
    if op_type == "Hardmax":
        x[0, 1, :2] = 5.0           # ties: the first maximum wins
    attrs = {} if axis is None else {"axis": axis}
    if shaped:
        run_case(op_type, x.shape, x=x, opset=opset, **attrs)
    else:
        run_unshaped(op_type, x, opset, **attrs)


# ---- dropout, flatten, depth/space -----------------------------------------------------------------
@pytest.mark.parametrize("opset", [7, 10, 12, 13, 22])
@pytest.mark.parametrize("with_mask", [False, True])
def test_dropout(opset, with_mask):
    """The mask marks kept elements, so at inference it is all ones (onnx.reference, and onnxruntime from
    Dropout-12 on; onnxruntime's Dropout-7/10 kernels write zeros instead: checked against ones there)."""
    x = randn(2, 3)
    mask_type = FLOAT if opset < 10 else onnx.TensorProto.BOOL
    outputs = (("y", FLOAT), ("mask", mask_type)) if with_mask else (("y", FLOAT),)
    params = [("ratio", np.array(0.3, np.float32)), ("training_mode", np.array(False))] if opset >= 12 else []
    kw = {"ratio": 0.3} if opset < 12 else {}
    if with_mask and opset in (7, 10):
        got = tfg.build(make_case("Dropout", x, params, opset, outputs=outputs, **kw), device="cpu").run({"x": x})
        np.testing.assert_array_equal(got["y"], x)
        assert got["mask"].dtype == (np.float32 if opset == 7 else np.bool_) and (got["mask"] == 1).all()
        return
    run_case("Dropout", x.shape, params, x=x, opset=opset, outputs=outputs, **kw)


def test_dropout_training_mode_is_refused():
    params = [("ratio", np.array(0.3, np.float32)), ("training_mode", np.array(True))]
    with pytest.raises(TensorforgeError, match="training_mode"):
        tfg.build(make_case("Dropout", randn(2, 3), params, 13), device="cpu")


@pytest.mark.parametrize("opset,axis", [(7, 0), (7, 1), (7, 3), (11, 2), (11, -1), (13, -3), (21, 4), (21, 1)])
def test_flatten(opset, axis):
    run_case("Flatten", (2, 3, 2, 2), opset=opset, axis=axis)


@pytest.mark.parametrize("op_type,x_shape,opset,mode", [
    ("DepthToSpace", (1, 8, 2, 3), 7, None), ("DepthToSpace", (1, 8, 2, 3), 11, "DCR"),
    ("DepthToSpace", (1, 8, 2, 3), 13, "CRD"), ("DepthToSpace", (2, 12, 1, 2), 13, None),
    ("SpaceToDepth", (2, 2, 4, 6), 7, None), ("SpaceToDepth", (1, 3, 2, 4), 13, None)])
def test_depth_space(op_type, x_shape, opset, mode):
    run_case(op_type, x_shape, opset=opset, blocksize=2, **({"mode": mode} if mode else {}))


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_to_depth_28_inverts_depth_to_space(mode):
    """SpaceToDepth-28's mode: the exact inverse of DepthToSpace with the same mode (checked against
    onnxruntime's DepthToSpace) and equal to SpaceToDepth-13 for DCR."""
    x = randn(1, 2, 4, 6)
    s2d = tfg.build(make_case("SpaceToDepth", x, (), 28, blocksize=2, mode=mode), device="cpu").run({"x": x})["y"]
    back = ort_run(make_case("DepthToSpace", s2d, (), 13, blocksize=2, mode=mode), {"x": s2d})["y"]
    np.testing.assert_array_equal(back, x)
    if mode == "DCR":
        np.testing.assert_array_equal(s2d, ort_run(make_case("SpaceToDepth", x, (), 13, blocksize=2), {"x": x})["y"])


# ---- grid sample -----------------------------------------------------------------------------------
@pytest.mark.parametrize("opset,mode", [(16, "bilinear"), (16, "nearest"), (16, "bicubic"), (20, "linear"),
                                        (20, "nearest"), (20, "cubic")])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample(opset, mode, padding_mode, align_corners):
    x = randn(1, 2, 4, 5)
    grid = rng.uniform(-1.2, 1.2, (1, 3, 2, 2)).astype(np.float32)
    model = make_case("GridSample", x, [("grid", grid)], opset, mode=mode, padding_mode=padding_mode,
                      align_corners=align_corners)
    check_against_ort(model, {"x": x})


@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_grid_sample_3d(mode):
    x = randn(1, 2, 3, 4, 3)
    grid = rng.uniform(-1, 1, (1, 2, 2, 3, 3)).astype(np.float32)
    check_against_ort(make_case("GridSample", x, [("grid", grid)], 20, mode=mode), {"x": x})


# ---- resize / upsample -----------------------------------------------------------------------------
def resize_params(opset, scales=None, sizes=None, roi=None):
    """Resize inputs (roi, scales, sizes) as initializers; '' marks an absent one (Resize-11 needs roi and
    scales present, empty when unused)."""
    empty = np.zeros(0, np.float32)
    roi_p = ("roi", np.array(roi, np.float32)) if roi is not None else (("roi", empty) if opset < 13 else ("", None))
    if sizes is not None:
        scales_p = ("scales", empty) if opset < 13 else ("", None)
        return [roi_p, scales_p, ("sizes", np.array(sizes, np.int64))]
    return [roi_p, ("scales", np.array(scales, np.float32))]


RESIZE_GEOMETRY = [  # x shape, scales (None → sizes), sizes: ×2, fractional up/down, down, sizes, 1-D
    ((1, 2, 4, 5), [1, 1, 2, 2], None),
    ((1, 2, 4, 5), [1, 1, 1.5, 0.6], None),
    ((1, 1, 6, 7), [1, 1, 0.5, 0.75], None),
    ((1, 2, 3, 4), None, [1, 2, 7, 5]),
    ((2, 3, 5), [1, 1, 2.5], None),
]
CTMS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]


@pytest.mark.parametrize("x_shape,scales,sizes", RESIZE_GEOMETRY)
@pytest.mark.parametrize("ctm", CTMS + ["tf_half_pixel_for_nn"])
@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
def test_resize_nearest(x_shape, scales, sizes, ctm, nearest_mode):
    run_case("Resize", x_shape, resize_params(13, scales, sizes), opset=13, mode="nearest",
             coordinate_transformation_mode=ctm, nearest_mode=nearest_mode)


@pytest.mark.parametrize("x_shape,scales,sizes", RESIZE_GEOMETRY)
@pytest.mark.parametrize("opset,ctm", [(11, c) for c in CTMS] + [(19, c) for c in CTMS + ["half_pixel_symmetric"]])
def test_resize_linear(x_shape, scales, sizes, ctm, opset):
    run_case("Resize", x_shape, resize_params(opset, scales, sizes), opset=opset, mode="linear",
             coordinate_transformation_mode=ctm)


@pytest.mark.parametrize("x_shape,scales,sizes", RESIZE_GEOMETRY[:4])
@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("a,exclude_outside", [(-0.75, 0), (-0.5, 1)])
def test_resize_cubic(x_shape, scales, sizes, ctm, a, exclude_outside):
    run_case("Resize", x_shape, resize_params(13, scales, sizes), opset=13, mode="cubic",
             coordinate_transformation_mode=ctm, cubic_coeff_a=a, exclude_outside=exclude_outside)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("scales,sizes", [([1, 1, 2, 1.5], None), (None, [1, 2, 3, 7])])
def test_resize_tf_crop_and_resize(mode, scales, sizes):
    roi = [0, 0, 0.2, -0.1, 1, 1, 0.9, 1.3]       # partly outside the image: extrapolation_value there
    run_case("Resize", (1, 2, 4, 5), resize_params(13, scales, sizes, roi), opset=13, mode=mode,
             coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-3.0)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("scales,sizes", [([1, 1, 0.5, 0.4], None), ([1, 1, 0.6, 1.5], None), (None, [1, 2, 3, 2])])
def test_resize_antialias(mode, scales, sizes):
    run_case("Resize", (1, 2, 7, 9), resize_params(18, scales, sizes), opset=18, mode=mode, antialias=1)


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
@pytest.mark.parametrize("axes", [[2, 3], [3, 2], [-1], [-2, 3]])
def test_resize_axes_and_aspect_policy(policy, axes):
    """onnxruntime ignores negative axes under not_larger/not_smaller (its own shape inference disagrees), so
    the oracle there is onnxruntime on the same model with the axes written as non-negative."""
    sizes, x = [7, 3][:len(axes)], randn(1, 2, 4, 5)
    model = make_case("Resize", x, resize_params(18, sizes=sizes), 18, mode="linear", axes=axes,
                      keep_aspect_ratio_policy=policy)
    if policy == "stretch" or min(axes) >= 0:
        check_against_ort(model, {"x": x})
        return
    oracle = make_case("Resize", x, resize_params(18, sizes=sizes), 18, mode="linear", axes=[a % 4 for a in axes],
                       keep_aspect_ratio_policy=policy)
    assert_close(tfg.build(model, device="cpu").run({"x": x}), ort_run(oracle, {"x": x}))


@pytest.mark.parametrize("op_type,opset,scales", [
    ("Resize", 10, [1, 1, 2, 3]), ("Resize", 10, [1, 1, 1.5, 2.5]), ("Resize", 10, [1, 1, 0.5, 0.6]),
    ("Upsample", 9, [1, 1, 2, 3]), ("Upsample", 9, [1, 1, 1.5, 2.5]), ("Upsample", 7, [1, 1, 1.5, 2.5])])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_legacy(op_type, opset, mode, scales):
    scales = np.array(scales, np.float32)
    if opset == 7:
        run_case(op_type, (1, 2, 4, 5), opset=opset, mode=mode, scales=scales.tolist())
    else:
        run_case(op_type, (1, 2, 4, 5), [("scales", scales)], opset=opset, mode=mode)


def test_resize_legacy_nearest_mixed_scales_is_refused():
    model = make_case("Resize", randn(1, 2, 4, 5), [("scales", np.array([1, 1, 2, 0.5], np.float32))], 10)
    with pytest.raises(TensorforgeError, match="both up- and downsamples"):
        tfg.build(model, device="cpu")


@pytest.mark.parametrize("x_shape,scales", [((1, 2, 5), [1, 1, 2]), ((1, 2, 2, 3, 2), [1, 1, 2, 2, 4])])
@pytest.mark.parametrize("mode,ctm,nearest_mode", [("nearest", "asymmetric", "floor"), ("linear", "align_corners", None),
                                                   ("linear", "pytorch_half_pixel", None)])
def test_resize_1d_3d(x_shape, scales, mode, ctm, nearest_mode):
    attrs = {"nearest_mode": nearest_mode} if nearest_mode else {}
    run_case("Resize", x_shape, resize_params(13, scales), opset=13, mode=mode, coordinate_transformation_mode=ctm,
             **attrs)


# ---- opset-6 versions (onnxruntime implements none of them) ----------------------------------------
def check_same_as(op_type, x, params, new_opset, new_attrs, old_opset, old_attrs):
    """tensorforge at an old version must equal onnxruntime at a later version with equivalent attributes."""
    want = ort_run(make_case(op_type, x, params, old_opset, **old_attrs), {"x": x})
    assert_close(tfg.build(make_case(op_type, x, params, new_opset, **new_attrs), device="cpu").run({"x": x}), want)


def test_average_pool_1_excludes_padding():
    """AveragePool-1 has no count_include_pad: it divides by the taps inside the input (-7's default)."""
    attrs = {"kernel_shape": [3, 3], "strides": [2, 1], "pads": [1, 1, 1, 0]}
    check_same_as("AveragePool", randn(1, 2, 5, 4), (), 6, attrs, 7, dict(attrs, count_include_pad=0))


def test_batch_norm_6():
    params = bn_params(3)
    check_same_as("BatchNormalization", randn(2, 3, 2, 2), params, 6, {"is_test": 1, "epsilon": 1e-3}, 7,
                  {"epsilon": 1e-3})
    with pytest.raises(TensorforgeError, match="is_test=0"):
        tfg.build(make_case("BatchNormalization", randn(2, 3, 2, 2), params, 6), device="cpu")


@pytest.mark.parametrize("c_shape,broadcast", [((3, 5), 0), ((5,), 1), ((1,), 1)])
def test_gemm_6(c_shape, broadcast):
    params = [("b", randn(5, 4)), ("c", randn(*c_shape))]
    attrs = {"alpha": 0.5, "beta": 2.0, "transB": 1}
    check_same_as("Gemm", randn(3, 4), params, 6, dict(attrs, broadcast=broadcast), 7, attrs)


def test_upsample_scales_fed_at_run_time():
    """scales as a graph input: the output shape is known only when the engine runs."""
    x, scales = randn(1, 2, 2, 3), np.array([1, 1, 2, 3], np.float32)
    model = single_node_model("Upsample", [("x", FLOAT, [1, 2, 2, 3]), ("scales", FLOAT, [4])], [("y", FLOAT, None)],
                              opset=9, mode="nearest")
    check_against_ort(model, {"x": x, "scales": scales})
