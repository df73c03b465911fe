"""GPU diagnosis (issue 12): where an INT8 engine's time goes, and what each quantized kernel costs in a CUDA
graph (no host launch cost in the number), beside fp16 cuBLAS/cuDNN on the same shape.

    PYTHONPATH=. python3 bench/gpu_smoke/int8_profile.py [--models resnet50,bert_base_seq128] [--batch 32]

Part 1 (kernels): BERT-base GEMMs at 32×128 tokens and resnet50 convolutions at batch 32, channels-last int8
input as the engine passes it: fp16 (cuBLAS / cuDNN channels-last), torch._int_mm alone, and every Triton int8
config of the fused kernel, each captured in a CUDA graph and replayed. Part 2 (engines): fp16 and int8 engines
of the zoo models, captured latency, then the uncaptured per-layer profile (top layers with op, tactic, dtypes).
Prints lines, exits 0 (a diagnosis, not a check) unless a part raises.
"""

import argparse
import os
import sys
import time
from collections import Counter, defaultdict

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", ".."))

from tensorforge.ir import Layer, get_spec  # noqa: E402
from tensorforge.kernels import quant_int_mm, triton_int8_gemm  # noqa: E402,F401
from tensorforge.kernels.registry import candidates  # noqa: E402

from quant_kernels import bench_ms  # noqa: E402  (the same event-timing loop)

DEV = torch.device("cuda")


def events_ms(fn, reps=30) -> float:
    """Median CUDA-event time of one call of `fn` after 3 warm-up calls (for callables that replay a graph)."""
    return bench_ms(fn, reps)


def graph_ms(fn, reps=20) -> float:
    """Median time of one call of `fn` captured in a CUDA graph: no host launch cost in the number."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
        with torch.cuda.graph(g, stream=s):
            fn()
    return events_ms(g.replay, reps)


def q8(shape):
    return torch.randint(-128, 128, shape, dtype=torch.int16, device=DEV).to(torch.int8)


def qlayer(op, n_out, act="Relu", conv=None):
    attrs = dict(x_dtype="int8", x_scale=0.02, x_zero_point=0, w_scale=(torch.rand(n_out) * 0.004 + 0.001).tolist(),
                 activation=act, y_scale=0.1, y_zero_point=0, y_dtype="int8")
    if conv:
        attrs.update(conv)
    return Layer("q", op, ["x", "w", "b"], ["y"], get_spec(op).resolve_attrs(attrs))


def tactic_times(layer, inputs):
    found, _ = candidates(layer, DEV)
    out = []
    for tac, cfg in found:
        if tac.name == "torch_ref":
            continue
        try:
            k = tac.build(layer, cfg, DEV)
            out.append((graph_ms(lambda: k(inputs)), tac.id(cfg)))
        except Exception as e:  # noqa: BLE001 - a diagnosis: report and go on
            out.append((float("inf"), f"{tac.id(cfg)} raised {type(e).__name__}: {str(e)[:120]}"))
    return sorted(out)


def kernels():
    m = 32 * 128
    for label, k, n in (("qkv", 768, 2304), ("attn_out", 768, 768), ("ffn1", 768, 3072), ("ffn2", 3072, 768)):
        a16 = torch.randn(m, k, device=DEV, dtype=torch.float16)
        w16 = torch.randn(n, k, device=DEV, dtype=torch.float16)
        b16 = torch.randn(n, device=DEV, dtype=torch.float16)
        a8, w8 = q8((m, k)), q8((n, k))
        wt = w8.t()
        t16 = graph_ms(lambda: torch.addmm(b16, a16, w16.t()))
        tmm = graph_ms(lambda: torch._int_mm(a8, wt))
        res = tactic_times(qlayer("QuantizedMatMul", n), [a8, w8, torch.randn(n, device=DEV)])
        print(f"GEMM {label} M{m} K{k} N{n}: fp16 addmm {t16:.4f} ms | _int_mm alone {tmm:.4f} ms "
              f"({t16 / tmm:.2f}x) | fused: " + ", ".join(f"{t:.4f} {tid}" for t, tid in res[:6]), flush=True)
    for label, cin, hw, cout, kk, st in (("1x1_256to64", 256, 56, 64, 1, 1), ("3x3_64", 64, 56, 64, 3, 1),
                                          ("3x3_128_s2", 128, 56, 128, 3, 2), ("3x3_256", 256, 14, 256, 3, 1),
                                          ("1x1_1024to256", 1024, 14, 256, 1, 1), ("1x1_64to256", 64, 56, 256, 1, 1)):
        x16 = torch.randn(32, cin, hw, hw, device=DEV, dtype=torch.float16).to(memory_format=torch.channels_last)
        w16 = torch.randn(cout, cin, kk, kk, device=DEV, dtype=torch.float16).to(memory_format=torch.channels_last)
        pad = kk // 2
        t16 = graph_ms(lambda: F.relu(F.conv2d(x16, w16, None, st, pad)))
        x8 = q8((32, hw, hw, cin)).permute(0, 3, 1, 2)          # channels-last, as the engine hands it on
        conv = dict(strides=[st, st], pads=[pad] * 4, dilations=[1, 1], group=1, kernel_shape=[kk, kk])
        res = tactic_times(qlayer("QuantizedConv", cout, conv=conv), [x8, q8((cout, cin, kk, kk)),
                                                                      torch.randn(cout, device=DEV)])
        print(f"CONV {label} b32: fp16 cudnn+relu {t16:.4f} ms | int8: "
              + ", ".join(f"{t:.4f} ({t16 / t:.2f}x) {tid}" for t, tid in res[:5]), flush=True)


def engines(models, batch):
    import numpy as np
    import tensorforge as tfg
    from tensorforge.runtime import ExecutionContext
    from tensorforge.runtime.profiler import profile_layers
    import precision_case as pc
    import zoo
    for name in models:
        module = zoo.make(name)
        onnx_bytes, _ = zoo.export(name, module)
        x = zoo.example(name, batch)
        lat, outs = {}, {}
        for prec in ("fp16", "int8"):
            t0 = time.perf_counter()
            e = tfg.build(onnx_bytes, shapes={"input": tuple(x.shape)}, device="cuda", **pc.build_flags(prec, name, batch))
            bt = time.perf_counter() - t0
            ctx = ExecutionContext(e.data, "cuda")
            xd = x.cuda()
            bound = ctx.bind_inputs({"input": xd}) or {"input": xd}
            lat[prec] = events_ms(lambda: ctx.run(bound, copy_outputs=False))   # the engine replays its own graph
            outs[prec] = ctx.run({"input": xd})["output"].float().flatten().cpu()
            ops = Counter(f"{l.op}:{l.tactic}" for l in e.data.layers if l.placement != "host")
            print(f"ENGINE {name} b{batch} {prec}: {lat[prec]:.4f} ms (CUDA graphs {ctx.graphs_enabled}: "
                  f"{ctx.graph_disabled_reason}), build {bt:.1f} s, "
                  f"{len(e.data.layers)} layers; {dict(sorted(ops.items()))}", flush=True)
            prof = profile_layers(ctx, {"input": xd}, iterations=10)
            layers = {l.name: l for l in e.data.layers}
            by_op = defaultdict(float)
            rows = prof.rows()
            for r in rows:
                lay = layers.get(r["name"])
                by_op[f"{lay.op}:{lay.tactic}" if lay else "?"] += r["medianMs"]
            print(f"  per op:tactic (uncaptured median ms): " + ", ".join(
                f"{k} {v:.3f}" for k, v in sorted(by_op.items(), key=lambda kv: -kv[1])[:14]))
            for r in sorted(rows, key=lambda r: -r["medianMs"])[:12]:
                lay = layers.get(r["name"])
                a = lay.attrs if lay else {}
                print(f"  {r['medianMs']:.4f} ms {r['name'][:48]} {lay.op if lay else '?'}:{lay.tactic if lay else '?'}"
                      f" {a.get('x_dtype', '')}->{a.get('y_dtype', '')} act={a.get('activation', '')}"
                      f" res={'residual_scale' in a and bool(a.get('residual_scale'))}")
            del ctx, e
            torch.cuda.empty_cache()
        cos = float(torch.nn.functional.cosine_similarity(outs["fp16"], outs["int8"], dim=0))
        print(f"ENGINE {name} b{batch}: int8 / fp16 speed {lat['fp16'] / lat['int8']:.3f}x, "
              f"cosine(int8, fp16 engine) {cos:.4f}", flush=True)
        np.random.seed(0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="resnet50,bert_base_seq128")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--skip-kernels", action="store_true")
    a = p.parse_args()
    print(f"device {torch.cuda.get_device_name()} torch {torch.__version__}")
    t0 = time.perf_counter()
    if not a.skip_kernels:
        kernels()
    print(f"kernels part {time.perf_counter() - t0:.1f} s", flush=True)
    engines([m for m in a.models.split(",") if m], a.batch)
    print(f"total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
