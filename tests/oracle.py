"""Test oracles shared by the suite: onnxruntime as the reference, and small ONNX model makers.

    check_against_ort(model_bytes, feeds)      # build with tensorforge, run, compare with onnxruntime,
                                               # then save → load the engine and compare again
    single_node_model("Gelu", [("x", FLOAT, [2, 3])], [("y", FLOAT, None)], opset=20, approximate="tanh")
"""

import io

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import TensorProto, helper

import tensorforge as tfg

FLOAT, INT64, BOOL, FLOAT16, INT32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL, TensorProto.FLOAT16, TensorProto.INT32


def ort_run(model_bytes: bytes, feeds: dict) -> dict:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    sess = ort.InferenceSession(model_bytes, opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, {k: np.asarray(v) for k, v in feeds.items()})))


def assert_close(got: dict, want: dict, rtol=1e-3, atol=1e-4, what=""):
    assert set(got) == set(want), f"{what}output names differ: {sorted(got)} vs {sorted(want)}"
    for name, w in want.items():
        g = got[name]
        g = g.detach().cpu().numpy() if isinstance(g, torch.Tensor) else np.asarray(g)
        assert g.shape == w.shape, f"{what}{name}: shape {g.shape} vs onnxruntime {w.shape}"
        assert g.dtype == w.dtype, f"{what}{name}: dtype {g.dtype} vs onnxruntime {w.dtype}"
        if w.dtype == np.bool_ or np.issubdtype(w.dtype, np.integer):
            np.testing.assert_array_equal(g, w, err_msg=f"{what}{name}")
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{what}{name}")


def check_against_ort(model, feeds: dict, rtol=1e-3, atol=1e-4, tmp_path=None, **build_kw):
    """Build `model` (bytes or ModelProto), compare with onnxruntime, round-trip the engine file, compare again."""
    if isinstance(model, onnx.ModelProto):
        model = model.SerializeToString()
    want = ort_run(model, feeds)
    engine = tfg.build(model, device="cpu", **build_kw)
    assert_close(engine.run(dict(feeds)), want, rtol, atol, "built: ")
    data = engine.serialize()
    if tmp_path is not None:
        path = tmp_path / "model.engine"
        engine.save(path)
        reloaded = tfg.load(path, device="cpu")
    else:
        from tensorforge.api.high_level import Engine
        from tensorforge.engine import from_bytes
        reloaded = Engine(from_bytes(data), "cpu")
    assert_close(reloaded.run(dict(feeds)), want, rtol, atol, "reloaded: ")
    return engine


def single_node_model(op_type, inputs, outputs, opset=17, domain="", initializers=(), node_inputs=None,
                      **attrs) -> bytes:
    """A one-node model. inputs/outputs: (name, elem_type, shape or None); `node_inputs` (default: the input
    names) may also name initializers, or '' for an absent optional input."""
    names = node_inputs if node_inputs is not None else [i[0] for i in inputs]
    node = helper.make_node(op_type, names, [o[0] for o in outputs], domain=domain, **attrs)
    graph = helper.make_graph([node], f"{op_type}_test",
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
                              initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(domain, opset)] if domain == "" else
                              [helper.make_opsetid("", 17), helper.make_opsetid(domain, opset)])
    model.ir_version = 8
    return model.SerializeToString()


def export(module: torch.nn.Module, args, opset=17, dynamo=False, **kw) -> bytes:
    """torch.onnx.export to bytes (legacy exporter by default)."""
    module = module.eval()
    if dynamo:
        prog = torch.onnx.export(module, tuple(args), dynamo=True, opset_version=opset, **kw)
        return prog.model_proto.SerializeToString()
    buf = io.BytesIO()
    torch.onnx.export(module, tuple(args), buf, dynamo=False, opset_version=opset, **kw)
    return buf.getvalue()
