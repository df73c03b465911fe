"""GPU smoke (issue 12): the resnet50 INT8 engine layer by layer, beside our fp16 engine, at batch 32.

    PYTHONPATH=. python3 bench/gpu_smoke/int8_layers.py [--batch 32] [--iters 30]

Builds torchvision resnet50 (zoo.make, random weights with re-estimated BatchNorm) as the benchmark does
(precision_case.build_flags: fp16 allowed, INT8 calibrated on 32 inputs distinct from the test inputs), prints every
INT8 layer (op, tactic, input/output dtypes, activation, residual kind), times both engines replaying their CUDA
graphs (CUDA events, the engine's own run path), lists the top kernels under torch.profiler, and compares both with
fp32 onnxruntime on 32 test inputs. Checks (one PASS/FAIL line each, exit 1 on any FAIL):
  int8_cosine      cosine to fp32 onnxruntime ≥ 0.99
  maxpool_int8     the MaxPool reads and writes int8 codes (passes/rules/qdq_pool.py) on the Triton kernel
  no_float_between no QuantizeLinear/DequantizeLinear/Cast layer between two quantized layers (only the input Q and
                   the output cast remain), and no elementwise torch kernel above 20 µs in the INT8 profile
Speed (int8 / fp16) is printed as a timing, against the 1.6× target of issue 12.
"""

import argparse
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", ".."))

import tensorforge as tfg  # noqa: E402
from tensorforge.runtime import ExecutionContext  # noqa: E402

import precision_case as pc  # noqa: E402
import zoo  # noqa: E402
from kernel_profile import kernel_table  # noqa: E402
from quant_kernels import bench_ms  # noqa: E402
from zoo_case import engine_runner, ort_reference  # noqa: E402

QUANTIZED = ("QuantizedConv", "QuantizedMatMul", "QuantizedConvTranspose")
FAILS: list[str] = []


def check(name: str, ok: bool, detail: str) -> None:
    print(f"{'PASS' if ok else 'FAIL'} {name} {detail}", flush=True)
    if not ok:
        FAILS.append(name)


def dtype_of(engine, name: str) -> str:
    info = engine.data.tensors.get(name)
    return str(info.dtype).replace("torch.", "") if info is not None and info.dtype is not None else "?"


def print_layers(engine) -> None:
    for la in engine.data.layers:
        a = la.attrs
        ins = ",".join(dtype_of(engine, i) for i in la.inputs[:1] + la.inputs[3:4] if i)
        outs = ",".join(dtype_of(engine, o) for o in la.outputs)
        extra = ""
        if la.op in QUANTIZED:
            res = "none" if len(la.inputs) < 4 or not la.inputs[3] else ("int8" if a.get("residual_scale") else "float")
            extra = f" act={a.get('activation')} residual={res} y={a.get('y_dtype')} out2={a.get('out2_dtype') or '-'}"
        print(f"  LAYER {la.op:<18} {la.tactic:<40} in {ins:<14} out {outs:<14}{extra} {la.name[:60]}")


def print_layer_times(ctx, engine, x) -> None:
    """The uncaptured per-layer profile (runtime.profiler): the 15 slowest layers with op, tactic and shapes."""
    from tensorforge.runtime.profiler import profile_layers
    rows = profile_layers(ctx, {"input": x}, iterations=10).rows()
    layers = {la.name: la for la in engine.data.layers}
    total = sum(r["medianMs"] for r in rows)
    print(f"  per-layer (uncaptured) total {total * 1e3:.1f} µs; slowest:")
    for r in sorted(rows, key=lambda r: -r["medianMs"])[:15]:
        la = layers.get(r["name"])
        shape = engine.data.tensors.get(la.outputs[0]).shape if la is not None and la.outputs[0] in engine.data.tensors \
            else "?"
        print(f"  TIME {r['medianMs'] * 1e3:8.1f} µs {la.op if la else '?':<16} {la.tactic if la else '?':<60} "
              f"out {shape} {r['name'][:50]}")


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


def float_between(engine) -> list[str]:
    """Names of Q/DQ/Cast layers that read a quantized layer's output or feed a quantized layer."""
    prod = {o: la for la in engine.data.layers for o in la.outputs}
    users: dict[str, list] = {}
    for la in engine.data.layers:
        for i in la.inputs:
            users.setdefault(i, []).append(la)
    bad = []
    for la in engine.data.layers:
        if la.op not in ("QuantizeLinear", "DequantizeLinear", "Cast"):
            continue
        before = any(prod.get(i) is not None and prod[i].op in QUANTIZED + ("MaxPool",) for i in la.inputs[:1])
        after = any(u.op in QUANTIZED + ("MaxPool",) for o in la.outputs for u in users.get(o, []))
        if before and after:
            bad.append(f"{la.op}:{la.name}")
    return bad


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--iters", type=int, default=30)
    a = p.parse_args()
    t0 = time.perf_counter()
    print(f"device {torch.cuda.get_device_name()} torch {torch.__version__}", flush=True)
    name, batch = "resnet50", a.batch
    onnx_bytes, _ = zoo.export(name, zoo.make(name))
    xs = pc.test_inputs(name)[:32]
    want = ort_reference(onnx_bytes, xs, 16)
    print(f"export + onnxruntime fp32 on {len(xs)} inputs: {time.perf_counter() - t0:.1f} s", flush=True)
    lat, cos, profiles = {}, {}, {}
    for prec in ("fp16", "int8"):
        t1 = time.perf_counter()
        engine = pc.build_engine(onnx_bytes, name, batch, prec, "cuda", "/tmp/int8_layers.timing")
        print(f"{prec}: build {time.perf_counter() - t1:.1f} s, {len(engine.data.layers)} layers", flush=True)
        ctx = ExecutionContext(engine.data, "cuda")
        got = pc.run_engine_on(ctx, xs, batch, "cuda")
        cos[prec] = cosine(got, want)
        x = zoo.example(name, batch).cuda()
        run = engine_runner(ctx, x, "cuda")
        lat[prec] = bench_ms(run, a.iters)
        profiles[prec] = kernel_table(run, 10)
        print(f"{prec}: {lat[prec] * 1e3:.1f} µs per batch of {batch} (CUDA graphs {ctx.graphs_enabled}: "
              f"{ctx.graph_disabled_reason}), {batch / lat[prec] * 1e3:.0f} img/s, cosine to fp32 ORT {cos[prec]:.5f}",
              flush=True)
        prof = profiles[prec]
        print(f"  kernels {prof['kernel_us']} µs in {prof['kernels']:.0f} launches, wall {prof['wall_us']} µs")
        for r in prof["top"][:10]:
            print(f"  KERNEL {r['us']:9.1f} µs ×{r['per_inference']:<5g} {r['kernel']}")
        if prec == "int8":
            print_layers(engine)
            print_layer_times(ctx, engine, x)
            pools = [la for la in engine.data.layers if la.op == "MaxPool"]
            check("maxpool_int8", bool(pools) and all(dtype_of(engine, la.inputs[0]) in ("int8", "uint8")
                                                      and "triton_int8" in la.tactic for la in pools),
                  "; ".join(f"{la.tactic} {dtype_of(engine, la.inputs[0])}->{dtype_of(engine, la.outputs[0])}"
                            for la in pools))
            bad = float_between(engine)
            slow = [r for r in prof["top"] if "elementwise" in r["kernel"] and r["us"] > 20]
            check("no_float_between", not bad and not slow,
                  f"Q/DQ/Cast between quantized layers: {bad or 'none'}; elementwise kernels > 20 µs: "
                  f"{[(r['kernel'][:60], r['us']) for r in slow] or 'none'}")
        del ctx, engine
        torch.cuda.empty_cache()
    check("int8_cosine", cos["int8"] >= 0.99, f"cosine {cos['int8']:.5f} (fp16 engine {cos['fp16']:.5f})")
    print(f"SPEED int8 / fp16 = {lat['fp16'] / lat['int8']:.3f}x (target 1.6x): fp16 {lat['fp16'] * 1e3:.1f} µs, "
          f"int8 {lat['int8'] * 1e3:.1f} µs; total {time.perf_counter() - t0:.1f} s", flush=True)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
