"""Crafting engine files as an attacker would: edit the manifest or the weights, recompute lengths and checksum.

    manifest, weights = split(data)          # manifest as raw JSON bytes, weights as the safetensors blob
    data = pack(manifest_bytes_or_dict, weights)
    small_cnn_engine()                       # bytes of a tiny Conv → Relu → GAP → Flatten → MatMul engine (CPU)

The small models are built with onnx.helper (no exporter), once per process.
"""

import functools
import hashlib
import json
import struct

import numpy as np
from onnx import TensorProto, helper, numpy_helper

HEADER = struct.Struct("<8sIQQ32s")


def split(data: bytes) -> tuple[bytes, bytes]:
    magic, version, mlen, wlen, _ = HEADER.unpack_from(data)
    body = data[HEADER.size:]
    return body[:mlen], body[mlen:mlen + wlen]


def header_version(data: bytes) -> int:
    return HEADER.unpack_from(data)[1]


def pack(manifest, weights: bytes, version: int | None = None, magic: bytes = b"TFGENGIN") -> bytes:
    raw = manifest if isinstance(manifest, (bytes, bytearray)) else json.dumps(manifest, sort_keys=True).encode()
    if version is None:
        from tensorforge.version import ENGINE_FORMAT_VERSION
        version = ENGINE_FORMAT_VERSION
    body = bytes(raw) + bytes(weights)
    return HEADER.pack(magic, version, len(raw), len(weights), hashlib.sha256(body).digest()) + body


def edit(data: bytes, fn) -> bytes:
    """Apply `fn(manifest_dict)` (in place or returning a new one) and re-pack with a valid checksum."""
    raw, weights = split(data)
    m = json.loads(raw)
    out = fn(m)
    return pack(m if out is None else out, weights)


def cnn_model(classes: int = 5) -> bytes:
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.standard_normal((4,)).astype(np.float32), "B"),
             numpy_helper.from_array(rng.standard_normal((4, classes)).astype(np.float32), "F")]
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flat"),
             helper.make_node("MatMul", ["f", "F"], ["y"], name="fc")]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


CNN_SHAPES = {"x": ((1, 3, 8, 8), (2, 3, 8, 8), (4, 3, 8, 8))}


@functools.lru_cache(maxsize=None)
def small_cnn_engine() -> bytes:
    import tensorforge as tfg
    return tfg.build(cnn_model(), shapes=CNN_SHAPES, device="cpu").serialize()
