"""Control-flow bodies as pre-planned programs (kernels/subnetwork.py, issue 18): Loop (scan outputs, a condition
that ends it early, an If inside whose condition is only known at run time), If and Scan (reversed directions)
against onnxruntime, built → serialized → loaded; the bodies run without `run_network` (no per-trip dict); and the
program is faster than the reference's per-trip interpretation. Plus the CPU shape-op tactics (cpu_shape_ops.py)
against their references."""

import time

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from oracle import ort_run
from tensorforge.engine import from_bytes
from tensorforge.ir import Layer, get_spec
from tensorforge.ir.ops import control
from tensorforge.kernels import cpu_shape_ops as so
from tensorforge.kernels import subnetwork
from tensorforge.runtime import ExecutionContext

F32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
CPU = torch.device("cpu")


def _vi(n, t, s):
    return helper.make_tensor_value_info(n, t, s)


def _c(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def _model(nodes, inputs, outputs, inits=()):
    m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def loop_model():
    """Loop(M=10, cond) over x (10, 8): h ← h·W + x_i, then If(sum(h) > 0): relu(h) else −h; stops when i ≥ stop
    (an input: a run-time condition); scan output: h at every trip."""
    then_g = helper.make_graph([helper.make_node("Relu", ["h1"], ["t"])], "then", [], [_vi("t", F32, [1, 8])])
    else_g = helper.make_graph([helper.make_node("Neg", ["h1"], ["e"])], "else", [], [_vi("e", F32, [1, 8])])
    body = helper.make_graph([
        helper.make_node("Gather", ["x", "i"], ["xi0"], axis=0),
        helper.make_node("Unsqueeze", ["xi0", "ax0"], ["xi"]),
        helper.make_node("MatMul", ["h_in", "W"], ["hw"]),
        helper.make_node("Add", ["hw", "xi"], ["h1"]),
        helper.make_node("ReduceSum", ["h1"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["pos"]),
        helper.make_node("If", ["pos"], ["h_out"], then_branch=then_g, else_branch=else_g),
        helper.make_node("Add", ["i", "one"], ["i1"]),
        helper.make_node("Less", ["i1", "stop"], ["cond_out"]),
        helper.make_node("Identity", ["h_out"], ["scan"])], "body",
        [_vi("i", I64, []), _vi("cond_in", BOOL, []), _vi("h_in", F32, [1, 8])],
        [_vi("cond_out", BOOL, []), _vi("h_out", F32, [1, 8]), _vi("scan", F32, [1, 8])])
    rng = np.random.default_rng(0)
    inits = [_c("M", np.int64(10)), _c("W", (rng.standard_normal((8, 8)) * 0.4).astype(np.float32)),
             _c("ax0", np.array([0], np.int64)), _c("zero", np.float32(0)), _c("one", np.int64(1)),
             _c("cond0", np.array(True))]
    return _model([helper.make_node("Loop", ["M", "cond0", "h0"], ["h", "hs"], body=body)],
                  [_vi("x", F32, [10, 8]), _vi("h0", F32, [1, 8]), _vi("stop", I64, [])],
                  [_vi("h", F32, None), _vi("hs", F32, None)], inits)


def _feeds(stop):
    rng = np.random.default_rng(1)
    return {"x": rng.standard_normal((10, 8)).astype(np.float32), "h0": rng.standard_normal((1, 8)).astype(np.float32),
            "stop": np.array(stop, np.int64)}


def _check(model, feeds, rtol=1e-5, atol=1e-6):
    want = ort_run(model, feeds)
    engine = tfg.build(model, device="cpu")
    for eng in (engine.data, from_bytes(engine.serialize())):
        got = ExecutionContext(eng, "cpu").run({k: torch.from_numpy(np.asarray(v)) for k, v in feeds.items()})
        for name, w in want.items():
            g = got[name].numpy()
            assert g.shape == w.shape, (name, g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=name)
    return engine


@pytest.mark.parametrize("stop", [10, 4, 1])
def test_loop_with_if_and_scan_outputs_matches_onnxruntime(stop, monkeypatch):
    model = loop_model()
    engine = tfg.build(model, device="cpu")
    assert [la.op for la in engine.data.layers if la.op == "Loop"] == ["Loop"]

    def no_interpreter(*a, **k):
        raise AssertionError("a body ran through run_network (a dict per trip) instead of its program")
    monkeypatch.setattr(control, "run_network", no_interpreter)
    _check(model, _feeds(stop))


def test_loop_check_catches_a_wrong_body():
    """The comparison can fail: the same engine with the body's If branches swapped disagrees with onnxruntime."""
    model, feeds = loop_model(), _feeds(10)
    data = from_bytes(tfg.build(model, device="cpu").serialize())
    loop = next(la for la in data.layers if la.op == "Loop")
    iff = next(la for la in loop.attrs["body"].layers if la.op == "If")
    iff.attrs["then_branch"], iff.attrs["else_branch"] = iff.attrs["else_branch"], iff.attrs["then_branch"]
    got = ExecutionContext(data, "cpu").run({k: torch.from_numpy(np.asarray(v)) for k, v in feeds.items()})["h"]
    assert not np.allclose(got.numpy(), ort_run(model, feeds)["h"], rtol=1e-3, atol=1e-4)


def test_scan_reversed_matches_onnxruntime():
    body = helper.make_graph([helper.make_node("Add", ["acc_in", "xt"], ["acc_out"]),
                              helper.make_node("Mul", ["acc_out", "xt"], ["y"])], "body",
                             [_vi("acc_in", F32, [3]), _vi("xt", F32, [3])],
                             [_vi("acc_out", F32, [3]), _vi("y", F32, [3])])
    model = _model([helper.make_node("Scan", ["acc0", "xs"], ["acc", "ys"], body=body, num_scan_inputs=1,
                                     scan_input_directions=[1], scan_output_directions=[1])],
                   [_vi("acc0", F32, [3]), _vi("xs", F32, [6, 3])], [_vi("acc", F32, None), _vi("ys", F32, None)])
    rng = np.random.default_rng(2)
    _check(model, {"acc0": rng.standard_normal(3).astype(np.float32),
                   "xs": rng.standard_normal((6, 3)).astype(np.float32)})


def test_top_level_if_runs_its_branch_program():
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["t"])], "then", [], [_vi("t", F32, [4])])
    else_g = helper.make_graph([helper.make_node("Sub", ["x", "x"], ["e"])], "else", [], [_vi("e", F32, [4])])
    model = _model([helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                    helper.make_node("Greater", ["s", "zero"], ["c"]),
                    helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
                   [_vi("x", F32, [4])], [_vi("y", F32, None)], [_c("zero", np.float32(0))])
    for sign in (1, -1):
        _check(model, {"x": (sign * np.abs(np.random.default_rng(3).standard_normal(4))).astype(np.float32)})


def test_program_is_faster_than_interpreting_the_body():
    """Measured: median of 15 alternating calls of the same Loop layer, program vs the reference's interpreter."""
    data = tfg.build(loop_model(), device="cpu").data
    layer = next(la for la in data.layers if la.op == "Loop")
    fast, slow = subnetwork._loop(layer, CPU), subnetwork._by_reference(layer, CPU)
    f = _feeds(10)
    by_name = {k: torch.from_numpy(np.asarray(v)) for k, v in f.items()}
    ins = [data.constants[n] if n in data.constants else by_name[n] if n else None for n in layer.inputs]
    torch.testing.assert_close(fast(ins)[0], slow(ins)[0], rtol=0, atol=0)
    t_fast, t_slow = [], []
    for _ in range(15):
        for fn, acc in ((fast, t_fast), (slow, t_slow)):
            t0 = time.perf_counter()
            fn(ins)
            acc.append(time.perf_counter() - t0)
    print(f"program {np.median(t_fast) * 1e3:.3f} ms, interpreted {np.median(t_slow) * 1e3:.3f} ms")
    assert np.median(t_fast) < np.median(t_slow)


# ---- shape ops ------------------------------------------------------------------------------------------

def _run(cls, op, inputs, **attrs):
    return cls.build(Layer("l", op, [f"i{k}" for k in range(len(inputs))], ["o"], attrs), {}, CPU)(inputs)[0]


@pytest.mark.parametrize("shape,allowzero", [([0, -1], 0), ([2, 0, 3], 0), ([6, 4], 1), ([-1], 0)])
def test_reshape_matches_the_reference(shape, allowzero):
    x, s = torch.randn(2, 4, 3), torch.tensor(shape)
    if allowzero and 0 in shape:
        pytest.skip("allowzero with a 0 needs a zero-sized input")
    want = get_spec("Reshape").reference(x, s, allowzero)
    torch.testing.assert_close(_run(so.CpuReshape, "Reshape", [x, s], allowzero=allowzero), want)


@pytest.mark.parametrize("axes", [[0], [-1], [1, 3], [-3]])
def test_unsqueeze_and_squeeze_match_the_references(axes):
    x, a = torch.randn(3, 5), torch.tensor(axes)
    want = get_spec("Unsqueeze").reference(x, a)
    got = _run(so.CpuUnsqueeze, "Unsqueeze", [x, a])
    assert got.shape == want.shape
    back = _run(so.CpuSqueeze, "Squeeze", [got, a])
    assert back.shape == get_spec("Squeeze").reference(want, a).shape == x.shape
    with pytest.raises(ValueError, match="not 1"):
        _run(so.CpuSqueeze, "Squeeze", [x, torch.tensor([0])])


@pytest.mark.parametrize("axis,index", [(0, 2), (0, -1), (1, 4), (-1, -5), (1, torch.tensor([[0, 2], [4, 1]]))])
def test_gather_matches_the_reference(axis, index):
    x = torch.randn(3, 5, 2) if axis != -1 else torch.randn(3, 5)
    idx = index if isinstance(index, torch.Tensor) else torch.tensor(index)
    got = _run(so.CpuGather, "Gather", [x, idx], axis=axis)
    torch.testing.assert_close(got, get_spec("Gather").reference(x, idx, axis), rtol=0, atol=0)
    got.fill_(7.0)
    assert not torch.any(x == 7.0)                # a copy, as the reference's: never an alias of the data
    with pytest.raises(IndexError, match="out of range"):
        _run(so.CpuGather, "Gather", [x, torch.tensor(9)], axis=0)


def test_small_bodies_run_on_one_thread():
    """A Loop/Scan whose tensors are all small runs its trips at 1 intra-op thread; a large tensor, a large body
    constant or a CUDA device keep the caller's setting; the caller's count is back afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with subnetwork._one_thread_if_small(CPU, 128 * 128, [torch.randn(1, 128), torch.randn(32, 64)]):
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        big = torch.randn(subnetwork.SMALL_BODY + 1)
        for body_max, values in ((0, [big]), (subnetwork.SMALL_BODY + 1, [torch.randn(3)])):
            with subnetwork._one_thread_if_small(CPU, body_max, values):
                assert torch.get_num_threads() == 2
        with subnetwork._one_thread_if_small(torch.device("cuda"), 0, []):
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
