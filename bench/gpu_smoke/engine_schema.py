"""GPU smoke of the engine-file checks (issue 13.3): CUDA-built engines (fp32 and fp16, Triton/cuDNN tactics,
generated pointwise chains) must pass the manifest schema, the cross-checks and the layer inference check when
read back, run to the same outputs, and still refuse a crafted file. One PASS/FAIL line per check, exit 1 on any.

    PYTHONPATH=. python3 bench/gpu_smoke/engine_schema.py        (≈ 30–60 s on an H200)
"""

import hashlib
import json
import struct
import sys
import time

import numpy as np
import torch
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from tensorforge.api.high_level import Engine
from tensorforge.engine import from_bytes
from tensorforge.util.errors import EngineFileError

HEADER = struct.Struct("<8sIQQ32s")


def _cnn() -> bytes:
    rng = np.random.default_rng(0)
    def f(name, *s):
        return numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.2, name)
    w1, b1, w2, fc = f("w1", 16, 3, 3, 3), f("b1", 16), f("w2", 16, 16, 3, 3), f("fc", 16, 10)
    nodes = [helper.make_node("Conv", ["x", w1.name, b1.name], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", w2.name], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["s"]), helper.make_node("Sigmoid", ["s"], ["sg"]),
             helper.make_node("Mul", ["s", "sg"], ["sw"]),
             helper.make_node("GlobalAveragePool", ["sw"], ["g"]), helper.make_node("Flatten", ["g"], ["fl"]),
             helper.make_node("MatMul", ["fl", fc.name], ["y"])]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 32, 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w1, b1, w2, fc])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def _mlp() -> bytes:
    rng = np.random.default_rng(1)
    w1 = numpy_helper.from_array(rng.standard_normal((64, 256)).astype(np.float32) * 0.1, "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((256, 64)).astype(np.float32) * 0.1, "w2")
    gam = numpy_helper.from_array(np.ones(64, np.float32), "gam")
    bet = numpy_helper.from_array(np.zeros(64, np.float32), "bet")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Gelu", ["h"], ["a"]),
             helper.make_node("MatMul", ["a", "w2"], ["o"]), helper.make_node("Add", ["o", "x"], ["r"]),
             helper.make_node("LayerNormalization", ["r", "gam", "bet"], ["y"], axis=-1)]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 16, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w1, w2, gam, bet])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 9
    return m.SerializeToString()


def _craft_int64_output(data: bytes) -> bytes:
    _, version, mlen, wlen, _ = HEADER.unpack_from(data)
    body = data[HEADER.size:]
    m = json.loads(body[:mlen])
    out = m["outputs"][0]["name"]
    for t in m["tensors"] + m["outputs"]:
        if t["name"] == out:
            t["dtype"] = "int64"
    raw = json.dumps(m, sort_keys=True).encode()
    new = raw + body[mlen:]
    return HEADER.pack(b"TFGENGIN", version, len(raw), wlen, hashlib.sha256(new).digest()) + new


def main() -> int:
    dev = sys.argv[1] if len(sys.argv) > 1 else "cuda"     # "cpu": a dry run of the script itself
    if dev == "cuda" and not torch.cuda.is_available():
        print("FAIL cuda_available no CUDA device")
        return 1
    results = []
    cases = [("cnn", _cnn(), {"x": ((1, 3, 32, 32), (4, 3, 32, 32), (8, 3, 32, 32))}, (4, 3, 32, 32)),
             ("mlp", _mlp(), {"x": ((1, 16, 64), (4, 16, 64), (8, 16, 64))}, (4, 16, 64))]
    for name, model, shapes, xshape in cases:
        for fp16 in (False, True):
            label = f"{name}_{'fp16' if fp16 else 'fp32'}"
            try:
                t0 = time.perf_counter()
                eng = tfg.build(model, fp16=fp16, shapes=shapes, device=dev)
                build_s = time.perf_counter() - t0
                x = torch.randn(xshape, device=dev)
                want = eng.run({"x": x})
                data = eng.serialize()
                t0 = time.perf_counter()
                loaded = from_bytes(data, f"{label}.engine")
                load_ms = (time.perf_counter() - t0) * 1e3
                got = Engine(loaded, dev).run({"x": x})
                same = all(torch.equal(want[k], got[k]) for k in want)
                results.append((f"{label}_reads_back", True, f"build {build_s:.1f} s, checked load {load_ms:.1f} ms, "
                                f"{len(loaded.layers)} layers, tactics {sorted({la.tactic for la in loaded.layers})[:4]}"))
                results.append((f"{label}_same_outputs", same, "bit-identical to the built engine" if same else
                                "outputs differ after reload"))
                try:
                    from_bytes(_craft_int64_output(data), f"{label}-crafted.engine")
                    results.append((f"{label}_crafted_refused", False, "int64-declared float output loaded"))
                except EngineFileError as e:
                    results.append((f"{label}_crafted_refused", "crafted" in str(e), str(e)[:120]))
            except Exception as e:  # noqa: BLE001 - report as a FAIL line
                results.append((f"{label}_reads_back", False, f"{type(e).__name__}: {str(e)[:200]}"))
    for name, ok, detail in results:
        print(f"{'PASS' if ok else 'FAIL'} {name} {detail}")
    return 0 if all(ok for _, ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
