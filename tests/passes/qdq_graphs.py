"""Hand-built Q/DQ ONNX graphs for the Q/DQ fusion tests, and the exact oracle: onnxruntime with graph
optimisations disabled, which evaluates every QuantizeLinear/DequantizeLinear as written."""

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from tensorforge.ir import get_spec

_NP = {TensorProto.UINT8: np.uint8, TensorProto.INT8: np.int8, TensorProto.INT32: np.int32}


class G:
    """A tiny graph builder: constants, Q/DQ pairs, nodes; `model()` gives the serialized ModelProto."""

    def __init__(self, opset=17):
        self.nodes, self.inits, self.inputs, self.outputs, self.opset, self.n = [], [], [], [], opset, 0

    def name(self, base):
        self.n += 1
        return f"{base}{self.n}"

    def const(self, value, name=None):
        name = name or self.name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op, inputs, **attrs):
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def input(self, name, shape, dtype=TensorProto.FLOAT):
        self.inputs.append(helper.make_tensor_value_info(name, dtype, shape))
        return name

    def output(self, name):
        self.outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))

    def q(self, x, scale, zp, dtype=np.uint8, **attrs):
        return self.node("QuantizeLinear", [x, self.const(np.float32(scale)), self.const(np.asarray(zp, dtype))],
                         **attrs)

    def dq(self, xq, scale, zp, dtype=np.uint8, **attrs):
        return self.node("DequantizeLinear", [xq, self.const(np.asarray(scale, np.float32)),
                                              self.const(np.asarray(zp, dtype))], **attrs)

    def qdq(self, x, scale, zp, dtype=np.uint8):
        return self.dq(self.q(x, scale, zp, dtype), scale, zp, dtype)

    def weight(self, w, axis, dtype=np.int8):
        """Per-channel symmetric int8 weights along `axis`, as onnxruntime's quantize_static writes them."""
        w = np.asarray(w, np.float32)
        red = tuple(i for i in range(w.ndim) if i != axis)
        s = (np.abs(w).max(axis=red) / 127).astype(np.float32)
        shape = [1] * w.ndim
        shape[axis] = -1
        wq = np.clip(np.round(w / s.reshape(shape)), -127, 127).astype(dtype)
        return self.dq(self.const(wq), s, np.zeros(s.shape, dtype), dtype, axis=axis)

    def bias(self, b, x_scale, w_scale):
        """int32 bias behind a DequantizeLinear with scale x_scale·w_scale (onnxruntime's form)."""
        s = (np.float32(x_scale) * np.asarray(w_scale, np.float32)).astype(np.float32)
        bq = np.round(np.asarray(b, np.float32) / s).astype(np.int32)
        return self.node("DequantizeLinear", [self.const(bq), self.const(s), self.const(np.zeros(s.shape, np.int32))],
                         axis=0)

    def model(self) -> bytes:
        g = helper.make_graph(self.nodes, "qdq", self.inputs, self.outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)])
        m.ir_version = 9 if self.opset < 21 else 10
        return m.SerializeToString()


def channel_scales(w, axis):
    w = np.asarray(w, np.float32)
    red = tuple(i for i in range(w.ndim) if i != axis)
    return (np.abs(w).max(axis=red) / 127).astype(np.float32)


def ort_exact(model: bytes, feeds: dict) -> dict:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def steps_off(got, want, step=1.0) -> np.ndarray:
    """|got − want| in quantization steps (integer outputs: in units of the integer)."""
    g = np.asarray(got).astype(np.float64)
    w = np.asarray(want).astype(np.float64)
    return np.abs(g - w) / step


def onnx_model(data: bytes):
    return onnx.load_from_string(data)


def quantize_written_out(y, scale, zp, qdt):
    """QuantizeLinear(y) per tensor through the QuantizeLinear reference (the ONNX formula): the oracle of the
    kernels that write Q(y) beside y."""
    z = torch.zeros((), dtype=qdt) if qdt == torch.float8_e4m3fn else torch.tensor(zp, dtype=qdt)
    return get_spec("QuantizeLinear").reference(y.float(), torch.tensor(scale, dtype=torch.float32), z)


def check_codes_against_exact(model: bytes, engine, feeds: dict, z: str, step: float, min_equal: float,
                              min_range: float):
    """The engine's quantized output z against onnxruntime's exact Q/DQ evaluation (≤ 1 step everywhere, exactly
    equal on ≥ min_equal of the elements, not a constant: max |z| > min_range) and against the unfused build
    (optimisation level 0), which must give the same codes."""
    got, want = engine.run(dict(feeds)), ort_exact(model, feeds)
    off = steps_off(got[z], want[z], step)
    assert off.max() <= 1 + 1e-5 and (off < 1e-5).mean() >= min_equal
    assert np.abs(want[z]).max() > min_range
    plain = tfg.build(model, device="cpu", optimization_level=0)
    np.testing.assert_array_equal(got[z], plain.run(dict(feeds))[z])
    return got, want
