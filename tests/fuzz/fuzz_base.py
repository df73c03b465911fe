"""Fuzz seeds: four small ONNX models, their engines (built once per process, build times zeroed so that cases
are the same in every process), the engine file's header layout, and the Case record.

    seed_models() → name → (ModelProto, input shapes);  seed_engine(name) → engine bytes
    split(data) → (version, manifest, weights);  pack(version, manifest, weights) → bytes with a valid checksum
"""

import hashlib
import json
import random
import struct
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HEADER = struct.Struct("<8sIQQ32s")
BOUNDARY_INTS = [0, 1, -1, 2, 3, 7, 64, 2**31 - 1, 2**31, -2**31, 2**62, -2**62, 2**63 - 1, 10**30]


# ---- seed models ------------------------------------------------------------------------------------------
def _model(nodes, inputs, outputs, inits, name, opset=17):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def seed_models() -> dict[str, tuple[onnx.ModelProto, dict]]:
    """name → (model, input shapes). Small: a build takes tens of milliseconds."""
    rng = np.random.default_rng(0)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    init = numpy_helper.from_array
    cnn = _model([helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", ["c"], ["r"], name="relu"),
                  helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
                  helper.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
                  helper.make_node("Flatten", ["g"], ["f"], name="flat"),
                  helper.make_node("Gemm", ["f", "F", "FB"], ["y"], name="fc", transB=1)],
                 [_vi("x", TensorProto.FLOAT, ["N", 3, 8, 8])], [_vi("y", TensorProto.FLOAT, None)],
                 [init(f32(4, 3, 3, 3), "W"), init(f32(4), "B"), init(f32(5, 4), "F"), init(f32(5), "FB")], "cnn")
    mlp = _model([helper.make_node("MatMul", ["x", "W1"], ["h"], name="mm1"),
                  helper.make_node("Add", ["h", "b1"], ["hb"], name="add1"),
                  helper.make_node("Gelu", ["hb"], ["a"], name="gelu", domain=""),
                  helper.make_node("LayerNormalization", ["a", "g", "b"], ["n"], name="ln", axis=-1, epsilon=1e-5),
                  helper.make_node("MatMul", ["n", "W2"], ["o"], name="mm2"),
                  helper.make_node("Softmax", ["o"], ["y"], name="sm", axis=-1)],
                 [_vi("x", TensorProto.FLOAT, ["B", 6])], [_vi("y", TensorProto.FLOAT, None)],
                 [init(f32(6, 8), "W1"), init(f32(8), "b1"), init(np.ones(8, np.float32), "g"),
                  init(np.zeros(8, np.float32), "b"), init(f32(8, 3), "W2")], "mlp", opset=20)
    shape = _model([helper.make_node("Shape", ["x"], ["s"], name="shape"),
                    helper.make_node("Gather", ["s", "i0"], ["n"], name="gather", axis=0),
                    helper.make_node("Concat", ["n", "m1"], ["ns"], name="concat", axis=0),
                    helper.make_node("Reshape", ["x", "ns"], ["r"], name="reshape"),
                    helper.make_node("Transpose", ["r"], ["t"], name="transpose", perm=[1, 0]),
                    helper.make_node("ReduceSum", ["t", "ax"], ["y"], name="reduce", keepdims=0),
                    helper.make_node("ConstantOfShape", ["n"], ["z"], name="cos",
                                     value=numpy_helper.from_array(np.array([2.0], np.float32))),
                    helper.make_node("Mul", ["y", "z"], ["y2"], name="mul")],
                   [_vi("x", TensorProto.FLOAT, ["N", 2, 3])], [_vi("y2", TensorProto.FLOAT, None)],
                   [init(np.array([0], np.int64), "i0"), init(np.array([-1], np.int64), "m1"),
                    init(np.array([0], np.int64), "ax")], "shape")
    mixed = _model([helper.make_node("Cast", ["x"], ["xf"], name="cast", to=TensorProto.FLOAT),
                    helper.make_node("Greater", ["xf", "th"], ["m"], name="gt"),
                    helper.make_node("Where", ["m", "xf", "zero"], ["w"], name="where"),
                    helper.make_node("Slice", ["w", "st", "en", "axs"], ["sl"], name="slice"),
                    helper.make_node("Pad", ["sl", "pads"], ["pd"], name="pad", mode="constant"),
                    helper.make_node("Sqrt", ["pd"], ["y"], name="sqrt")],
                   [_vi("x", TensorProto.INT32, [2, 5])], [_vi("y", TensorProto.FLOAT, None)],
                   [init(np.array(1.0, np.float32), "th"), init(np.array(0.0, np.float32), "zero"),
                    init(np.array([1], np.int64), "st"), init(np.array([4], np.int64), "en"),
                    init(np.array([1], np.int64), "axs"), init(np.array([0, 1, 0, 1], np.int64), "pads")], "mixed")
    return {"cnn": (cnn, {"x": (2, 3, 8, 8)}), "mlp": (mlp, {"x": (3, 6)}), "shape": (shape, {"x": (4, 2, 3)}),
            "mixed": (mixed, {"x": (2, 5)})}


def profile_of(shapes: dict) -> dict:
    """A profile around each seed's shape: batch 1..2×."""
    out = {}
    for k, s in shapes.items():
        lo = (1,) + tuple(s[1:])
        hi = (2 * s[0],) + tuple(s[1:])
        out[k] = (lo, tuple(s), hi)
    return out


# ---- cases and seed engines ----------------------------------------------------------------------------------------------
@dataclass
class Case:
    kind: str                  # "engine" | "onnx"
    seed_model: str
    mutation: str
    payload: bytes             # the engine file, or the ONNX model
    oracle_model: bytes | None = None     # weight-value edits: the equally edited ONNX model
    feeds_shapes: dict = field(default_factory=dict)
    index: int = 0


_SEEDS_CACHE: dict = {}


def _seeds():
    if not _SEEDS_CACHE:
        _SEEDS_CACHE.update(seed_models())
    return _SEEDS_CACHE


_ENGINES: dict = {}


def seed_engine(name: str) -> bytes:
    if name not in _ENGINES:
        import tensorforge as tfg
        model, shapes = _seeds()[name]
        dynamic = any(not d.HasField("dim_value") for vi in model.graph.input for d in vi.type.tensor_type.shape.dim)
        data = tfg.build(model.SerializeToString(), device="cpu",
                         shapes=profile_of(shapes) if dynamic else None).serialize()
        version, manifest, weights = split(data)          # build times vary: zero them, so cases are reproducible
        m = json.loads(manifest)
        m["build_info"] = _zero_floats(m["build_info"])
        _ENGINES[name] = pack(version, json.dumps(m, sort_keys=True, separators=(",", ":")).encode(), weights)
    return _ENGINES[name]


def _zero_floats(v):
    if isinstance(v, float):
        return 0.0
    if isinstance(v, dict):
        return {k: _zero_floats(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_zero_floats(x) for x in v]
    return v


def split(data: bytes):
    _, version, mlen, wlen, _ = HEADER.unpack_from(data)
    body = data[HEADER.size:]
    return version, body[:mlen], body[mlen:mlen + wlen]


def pack(version: int, manifest: bytes, weights: bytes, magic=b"TFGENGIN") -> bytes:
    body = manifest + weights
    return HEADER.pack(magic, version, len(manifest), len(weights), hashlib.sha256(body).digest()) + body


