"""Loop/Scan bodies with trip-invariant work taken out of the trips (kernels/body_program.py, issue 18) against
onnxruntime: invariant layers in the prelude, Gather(x, i)·W lifted to (x·W)[i] (with a fused residual, with the
following MatMul joined into one addmm, fully lifted chains whose rows are scan outputs), the run-time refusals
(a batched weight, far more rows than trips) that fall back to the plain program, a Scan's captured-only layers;
and a check that fails when the lifted row is taken wrong on purpose."""

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from oracle import ort_run
from tensorforge.engine import from_bytes
from tensorforge.kernels import body_program, subnetwork
from tensorforge.runtime import ExecutionContext

F32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
CPU = torch.device("cpu")
H, K = 16, 8


def _vi(n, t, s):
    return helper.make_tensor_value_info(n, t, s)


def _c(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def loop_model(body_nodes, trips, rows, w_shape=(K, H), scan=False, u_input=False):
    """Loop(M=trips) over h (1, H) whose body reads the outer x (rows, K), W `w_shape`, U (H, H) (an initializer,
    or with `u_input` a graph input: captured, not a constant), b (H,); outputs h and, with `scan`, `s` stacked."""
    outs = [_vi("cond_out", BOOL, []), _vi("h_out", F32, None)] + ([_vi("s", F32, None)] if scan else [])
    body = helper.make_graph(body_nodes + [helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
                             [_vi("i", I64, []), _vi("cond_in", BOOL, []), _vi("h_in", F32, [1, H])], outs)
    rng = np.random.default_rng(0)
    U = (np.random.default_rng(5).standard_normal((H, H)) * 0.2).astype(np.float32)
    inits = [_c("M", np.int64(trips)), _c("W", (rng.standard_normal(w_shape) * 0.3).astype(np.float32)),
             *([] if u_input else [_c("U", U)]),
             _c("b", (rng.standard_normal(H) * 0.1).astype(np.float32)), _c("ax0", np.array([0], np.int64)),
             _c("half", np.float32(0.5))]
    loop_outs = ["h"] + (["hs"] if scan else [])
    graph = helper.make_graph([helper.make_node("Loop", ["M", "", "h0"], loop_outs, body=body)], "g",
                              [_vi("x", F32, [rows, K]), _vi("h0", F32, [1, H])] + ([_vi("U", F32, [H, H])] if u_input else []),
                              [_vi(n, F32, None) for n in loop_outs], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def _row_nodes(out="xi"):
    return [helper.make_node("Gather", ["x", "i"], ["xi0"], axis=0), helper.make_node("Unsqueeze", ["xi0", "ax0"], [out])]


RNN_BODY = _row_nodes() + [                              # h ← tanh(x_i·W + h·U + b): the bench's loop_if_32 body
    helper.make_node("MatMul", ["xi", "W"], ["zx"]), helper.make_node("MatMul", ["h_in", "U"], ["zh"]),
    helper.make_node("Add", ["zx", "zh"], ["zs"]), helper.make_node("Add", ["zs", "b"], ["z"]),
    helper.make_node("Tanh", ["z"], ["h_out"])]
LIFTED_SCAN_BODY = _row_nodes() + [                      # s = relu(x_i·W + b)·0.5 lifted whole; h ← h·U + s
    helper.make_node("MatMul", ["xi", "W"], ["zx"]), helper.make_node("Add", ["zx", "b"], ["zb"]),
    helper.make_node("Relu", ["zb"], ["zr"]), helper.make_node("Mul", ["zr", "half"], ["s"]),
    helper.make_node("MatMul", ["h_in", "U"], ["zh"]), helper.make_node("Add", ["zh", "s"], ["h_out"])]
INVARIANT_BODY = _row_nodes() + [                        # Ut = transpose(U)·0.5 reads only captured U: prelude
    helper.make_node("Transpose", ["U"], ["Ut0"], perm=[1, 0]), helper.make_node("Mul", ["Ut0", "half"], ["Ut"]),
    helper.make_node("MatMul", ["h_in", "Ut"], ["zh"]), helper.make_node("MatMul", ["xi", "W"], ["zx"]),
    helper.make_node("Mul", ["zx", "zh"], ["zm"]), helper.make_node("ReduceSum", ["xi"], ["xs"], keepdims=1),
    helper.make_node("Sub", ["zm", "xs"], ["d"]),
    helper.make_node("Add", ["zh", "d"], ["h_out"])]


def _feeds(rows, seed=1, u_input=False):
    rng = np.random.default_rng(seed)
    u = {"U": (np.random.default_rng(5).standard_normal((H, H)) * 0.2).astype(np.float32)} if u_input else {}
    return {"x": rng.standard_normal((rows, K)).astype(np.float32),
            "h0": (rng.standard_normal((1, H)) * 0.5).astype(np.float32), **u}


def _run(data, feeds):
    return ExecutionContext(data, "cpu").run({k: torch.from_numpy(v) for k, v in feeds.items()})


def _check(model, feeds):
    want = ort_run(model, feeds)
    engine = tfg.build(model, device="cpu")
    for data in (engine.data, from_bytes(engine.serialize())):
        got = _run(data, feeds)
        for name, w in want.items():
            assert got[name].shape == w.shape, name
            np.testing.assert_allclose(got[name].numpy(), w, rtol=1e-4, atol=1e-5, err_msg=name)
    return engine


def _program(engine):
    loop = next(la for la in engine.data.layers if la.op == "Loop")
    body = loop.attrs["body"]
    n = int(loop.attrs.get("num_captured", 0))
    return body_program.BodyProgram(body, CPU, subnetwork._kernels(body, CPU), invariant=body.inputs[len(body.inputs) - n:],
                                    counter=body.inputs[0])


def test_rnn_body_lifts_the_input_gemm_and_joins_the_hidden_one():
    model = loop_model(RNN_BODY, trips=12, rows=12)
    prog = _program(_check(model, _feeds(12)))
    assert {"xi0", "xi"} <= set(prog.lifted)               # x_i and its Unsqueeze: rows of the whole stack
    assert len(prog.steps) == 1, prog.steps               # tanh((x·W + b)[i] + h·U): one addmm, tanh in place


def test_a_row_value_read_twice_is_not_folded():
    """z = (x·W + h·U) + b is also a scan output: tanh is not applied to it in place (z stays z)."""
    body = RNN_BODY[:-1] + [helper.make_node("Tanh", ["z"], ["h_out"]), helper.make_node("Identity", ["z"], ["s"])]
    model = loop_model(body, trips=8, rows=8, scan=True)
    prog = _program(_check(model, _feeds(8)))
    assert len(prog.steps) == 2                            # the addmm row (+ b folded), then tanh on its own


def test_fully_lifted_chain_and_its_rows_as_scan_outputs():
    model = loop_model(LIFTED_SCAN_BODY, trips=9, rows=9, scan=True)
    engine = _check(model, _feeds(9))
    prog = _program(engine)
    assert "s" in prog.lifted
    got = _run(engine.data, _feeds(9))["hs"]
    got.fill_(0)                                           # the scan output's rows are copies, not the stack's views
    np.testing.assert_allclose(_run(engine.data, _feeds(9))["hs"].numpy(), ort_run(model, _feeds(9))["hs"],
                               rtol=1e-4, atol=1e-5)


def test_captured_only_layers_run_once_in_the_prelude():
    prog = _program(_check(loop_model(INVARIANT_BODY, trips=7, rows=7, u_input=True), _feeds(7, u_input=True)))
    assert len(prog.hoisted) == 2                          # Transpose(U) and ·0.5 leave the trip
    assert "xi" in prog.lifted                             # read by a trip layer (ReduceSum) and lifted (MatMul)


@pytest.mark.parametrize("why,trips,rows,w_shape", [("batched weight", 6, 6, (2, K, H)),
                                                     ("far more rows than trips", 3, 40, (K, H))])
def test_refused_lifts_run_the_plain_program(why, trips, rows, w_shape):
    nodes = _row_nodes() + [helper.make_node("MatMul", ["xi", "W"], ["zx"]),
                            helper.make_node("ReduceSum", ["zx", "ax0"], ["zr"], keepdims=0),
                            helper.make_node("Add", ["h_in", "zr"], ["h_out"])]
    engine = _check(loop_model(nodes, trips, rows, w_shape), _feeds(rows))
    prog = _program(engine)
    assert prog.lifted and prog.prelude([torch.from_numpy(_feeds(rows)["x"])], trips) is None, why


def test_scan_captured_only_layers_in_the_prelude():
    body = helper.make_graph([helper.make_node("Transpose", ["Wc"], ["Wt"], perm=[1, 0]),
                              helper.make_node("MatMul", ["xt", "Wt"], ["p"]),
                              helper.make_node("Add", ["acc_in", "p"], ["acc_out"]),
                              helper.make_node("Tanh", ["acc_out"], ["y"])], "body",
                             [_vi("acc_in", F32, [3]), _vi("xt", F32, [4])], [_vi("acc_out", F32, [3]), _vi("y", F32, [3])])
    graph = helper.make_graph([helper.make_node("Scan", ["acc0", "xs"], ["acc", "ys"], body=body, num_scan_inputs=1)],
                              "g", [_vi("acc0", F32, [3]), _vi("xs", F32, [5, 4]), _vi("Wc", F32, [3, 4])],
                              [_vi("acc", F32, None), _vi("ys", F32, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    rng = np.random.default_rng(4)
    feeds = {"acc0": rng.standard_normal(3).astype(np.float32), "xs": rng.standard_normal((5, 4)).astype(np.float32),
             "Wc": rng.standard_normal((3, 4)).astype(np.float32)}
    engine = _check(m.SerializeToString(), feeds)
    scan = next(la for la in engine.data.layers if la.op == "Scan")
    b = scan.attrs["body"]
    prog = body_program.BodyProgram(b, CPU, subnetwork._kernels(b, CPU), invariant=b.inputs[-1:])
    assert [la for la in b.layers if la.op == "Transpose"] and len(prog.hoisted) == 1


def test_check_catches_a_wrong_row(monkeypatch):
    """The comparison can fail: with the lifted row taken one trip late the Loop disagrees with onnxruntime."""
    model, feeds = loop_model(LIFTED_SCAN_BODY, trips=9, rows=10, scan=True), _feeds(10)
    monkeypatch.setattr(body_program, "_row_copy", lambda ins: [ins[0].select(0, ins[1] + 1).clone()])
    monkeypatch.setattr(body_program, "_row", lambda ins: [ins[0].select(0, ins[1] + 1)])
    got = _run(tfg.build(model, device="cpu").data, feeds)["hs"].numpy()
    assert not np.allclose(got, ort_run(model, feeds)["hs"], rtol=1e-3, atol=1e-4)


def test_check_catches_a_wrong_fold(monkeypatch):
    """The comparison can fail: with the folded addend subtracted instead of added the Loop disagrees."""
    model, feeds = loop_model(RNN_BODY, trips=12, rows=12), _feeds(12)
    monkeypatch.setattr(body_program, "_add_stack", lambda v, trips: v[0] - v[1])
    got = _run(tfg.build(model, device="cpu").data, feeds)["h"].numpy()
    assert not np.allclose(got, ort_run(model, feeds)["h"], rtol=1e-3, atol=1e-4)
