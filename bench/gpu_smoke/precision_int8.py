"""GPU smoke of issue 12's precision side (calibration, implicit INT8/FP8, --best, sparsity) on CUDA.
One PASS/FAIL line per check with timings; exit 1 on any FAIL.   PYTHONPATH=. python3 bench/gpu_smoke/precision_int8.py

Checks: a TensorRT-style IInt8EntropyCalibrator2 handing CUDA-tensor pointers calibrates a small CNN (cosine ≥ 0.99
to the fp32 engine, the cache written and read back byte for byte); FP8 (sm_89+) and --best build and stay close;
--sparsity=force on a 2048×2048 fp16 Linear picks the semi-structured sparse tactic (or says why not) and matches
F.linear on the pruned weight; sparse vs dense GEMM time.
"""

import os
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))

import tensorforge as trt  # noqa: E402
from precision_models import cosine, images, small_cnn  # noqa: E402
from tensorforge.builder import BuilderConfig, build_engine  # noqa: E402
from tensorforge.builder.calibration import configure, read_cache, write_cache  # noqa: E402
from tensorforge.builder.sparsity import prune_2_4  # noqa: E402
from tensorforge.engine import from_bytes  # noqa: E402
from tensorforge.parser import parse_model  # noqa: E402
from tensorforge.runtime import ExecutionContext  # noqa: E402

DEV = torch.device("cuda")
checks = []


def check(name, ok, detail):
    checks.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {name} {detail}", flush=True)


class Calib(trt.IInt8EntropyCalibrator2):
    def __init__(self, batches, cache):
        trt.IInt8EntropyCalibrator2.__init__(self)
        self.batches, self.cache = iter(batches), cache
        self.buf = torch.empty(8, 3, 8, 8, device="cuda")

    def get_batch_size(self):
        return 8

    def get_batch(self, names):
        try:
            self.buf.copy_(torch.from_numpy(next(self.batches)))
        except StopIteration:
            return None
        return [int(self.buf.data_ptr())]

    def read_calibration_cache(self):
        return open(self.cache, "rb").read() if os.path.exists(self.cache) else None

    def write_calibration_cache(self, data):
        open(self.cache, "wb").write(data)


def run(engine, x):
    return ExecutionContext(engine, DEV).run({"x": torch.from_numpy(x).to(DEV)})["y"].float().cpu().numpy()


def main() -> int:
    model = small_cnn(batch=8)
    x = images(1, seed=99, batch=8)[0]
    ref = run(build_engine(parse_model(model), BuilderConfig(device="cuda")), x)
    tmp = tempfile.mkdtemp()
    cache = os.path.join(tmp, "cnn.cache")
    t0 = time.perf_counter()
    builder = trt.Builder(trt.Logger(trt.Logger.ERROR), device="cuda")
    network = builder.create_network(0)
    trt.OnnxParser(network, builder.logger).parse(model)
    config = builder.create_builder_config()
    config.set_flag(trt.BuilderFlag.INT8)
    config.int8_calibrator = Calib(images(8, seed=1, batch=8), cache)
    engine = from_bytes(bytes(builder.build_serialized_network(network, config)))
    cos = cosine(run(engine, x), ref)
    check("int8_trt_calibrator_cuda_pointers", cos >= 0.99 and os.path.exists(cache),
          f"cosine {cos:.5f}, build {time.perf_counter() - t0:.1f} s, tactics "
          f"{sorted({la.tactic for la in engine.layers if 'Quantized' in la.op})}")
    data = open(cache, "rb").read()
    check("cache_round_trip", write_cache(read_cache(data)) == data, f"{len(data)} bytes")
    for flags in ({"fp8": True}, {"best": True}):
        name = next(iter(flags))
        if name == "fp8" and torch.cuda.get_device_capability() < (8, 9):
            check("fp8_build", True, "skipped: needs sm_89+")
            continue
        cfg = configure(BuilderConfig(device="cuda"), data=[{"x": b} for b in images(8, seed=2, batch=8)], **flags)
        t0 = time.perf_counter()
        e = build_engine(parse_model(model), cfg)
        cos = cosine(run(e, x), ref)
        check(f"{name}_build", cos >= 0.99, f"cosine {cos:.5f}, build {time.perf_counter() - t0:.1f} s, precisions "
              f"{sorted({str(la.precision) for la in e.layers})}")
    # sparsity: a big fp16 Linear, forced to 2:4
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    w = rng.standard_normal((2048, 2048)).astype(np.float32) * 0.02
    g = helper.make_graph([helper.make_node("Gemm", ["x", "W"], ["y"], name="fc", transB=1)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256, 2048])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256, 2048])],
                          [numpy_helper.from_array(w, "W")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    e = build_engine(parse_model(m), BuilderConfig(device="cuda", fp16=True, sparsity="force"))
    layer = next(la for la in e.layers if la.op in ("SparseGemm", "Gemm", "MatMulEpilogue"))
    xs = torch.randn(256, 2048, device=DEV)
    got = ExecutionContext(e, DEV).run({"x": xs})["y"].float()
    wp = prune_2_4(torch.from_numpy(w), 1).to(DEV)
    want = torch.nn.functional.linear(xs.half(), wp.half()).float()
    err = float((got - want).abs().max())
    check("sparse_force_numerics", err < 5e-2, f"max err {err:.3g}; layer {layer.op} tactic {layer.tactic}; "
          f"info {e.build_info.get('sparsity', {}).get('dense')}")
    check("sparse_tactic_chosen_or_reason", layer.op == "SparseGemm", f"tactic {layer.tactic}")
    try:
        sw = torch.sparse.to_sparse_semi_structured(wp.half())
        xh = xs.half()
        for fn, label in ((lambda: torch.nn.functional.linear(xh, sw), "sparse"),
                          (lambda: torch.nn.functional.linear(xh, wp.half()), "dense")):
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(50):
                fn()
            torch.cuda.synchronize()
            print(f"  {label} 256x2048x2048 fp16: {(time.perf_counter() - t0) / 50 * 1e3:.4f} ms")
        check("semi_structured_available", True, "torch.sparse.to_sparse_semi_structured ran")
    except Exception as exc:  # noqa: BLE001 - reported as the check's detail
        check("semi_structured_available", False, f"{type(exc).__name__}: {exc}")
    return 0 if all(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
