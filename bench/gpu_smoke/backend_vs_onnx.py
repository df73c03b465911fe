"""GPU smoke (issue 14.6): where torch.compile(backend="tensorforge") and our ONNX engine part on a zoo model.

At 1359748 the backend matched the ONNX engine within 2 % on 12 of 14 zoo rows but took 1.19× on BERT b1 and
1.12× on GPT-2 b1, with the same fused network on the CPU (35 layers each, tiny BERT). This separates the cost:
per case, fp16 (fp32 with --device cpu), one process, host-timed medians (sync after each call) of
  onnx-engine       the ONNX export built by tfg.build, run as the bench runs it (bound inputs, static outputs)
  backend           the compiled module called as a user calls it (dynamo guards + EngineCall + the engine)
  backend-call      the backend's EngineCall alone (no dynamo)
  backend-engine    the backend's own engine run as the ONNX engine is (bound inputs, static outputs)
  dynamo-floor      torch.compile with a backend that returns a fixed tensor (dynamo's own per-call cost)
and the (op, tactic) pairs that differ between the two engines, their CUDA-graph state and the output's relative
error between them. No pass/fail: a diagnosis.

    PYTHONPATH=. python3 bench/gpu_smoke/backend_vs_onnx.py --cases bert_base_seq128:1,gpt2_seq128:1
"""

import argparse
import os
import sys
import time
from collections import Counter

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", ".."))

import tensorforge as tfg  # noqa: E402
import tensorforge.frontend_torch as ft  # noqa: E402
import zoo  # noqa: E402
from tensorforge.runtime import ExecutionContext  # noqa: E402


DEVICE = "cuda"


def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def timed(fn, iters=100) -> float:
    with torch.inference_mode():
        for _ in range(10):
            fn()
        sync()
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2] * 1e3


def bound_runner(engine, name, x):
    ctx = ExecutionContext(engine.data, DEVICE)
    feeds = {name: x}
    bound = ctx.bind_inputs(feeds) or feeds
    return ctx, (lambda: ctx.run(bound, copy_outputs=False))


def first(y):
    y = y[0] if isinstance(y, (tuple, list)) else y
    return next(iter(y.values())) if isinstance(y, dict) else y


def case(name: str, batch: int) -> None:
    module = zoo.make(name).to(DEVICE)
    x = zoo.example(name, batch, device=DEVICE)
    t0 = time.perf_counter()
    data, _ = zoo.export(name, zoo.make(name))
    onnx = tfg.build(data, fp16=DEVICE == "cuda", shapes={"input": tuple(x.shape)}, device=DEVICE)
    onnx_s = time.perf_counter() - t0
    onnx_ctx, run_onnx = bound_runner(onnx, "input", x)
    torch._dynamo.reset()
    t0 = time.perf_counter()
    compiled = torch.compile(module, backend="tensorforge", options={"fp16": DEVICE == "cuda"}, dynamic=False)
    with torch.inference_mode():
        y_backend = compiled(x)
    backend_s = time.perf_counter() - t0
    report = ft.last_report()
    call, engine = report.calls[0], report.built[0]
    args = [x if n in call.feeds else None for n in call.arg_names]
    feed = call.feeds[0] if call.feeds else engine.data.input_names[0]
    backend_ctx, run_backend_engine = bound_runner(engine, feed, x)
    with torch.inference_mode():
        y_onnx = first(onnx_ctx.run({"input": x}))
    err = ((first(y_backend).float() - y_onnx.float()).abs().max() / y_onnx.float().abs().max()).item()
    times = {"onnx-engine": timed(run_onnx), "backend": timed(lambda: compiled(x)),
             "backend-call": timed(lambda: call(*args)), "backend-engine": timed(run_backend_engine)}
    fixed = first(y_backend).clone()
    torch._dynamo.reset()
    floor = torch.compile(module, backend=lambda gm, ex: (lambda *a: (fixed,)), dynamic=False)
    with torch.inference_mode():
        floor(x)
    times["dynamo-floor"] = timed(lambda: floor(x))
    print(f"CASE {name} b{batch}: builds onnx {onnx_s:.1f} s, backend {backend_s:.1f} s; {report}; "
          f"backend vs onnx max rel diff {err:.2e}", flush=True)
    print(f"TIME {name} b{batch}: " + ", ".join(f"{k} {v:.3f} ms" for k, v in times.items()), flush=True)
    ta = Counter((layer.op, layer.tactic) for layer in engine.data.layers)
    tb = Counter((layer.op, layer.tactic) for layer in onnx.data.layers)
    print(f"LAYERS {name} b{batch}: backend {len(engine.data.layers)}, onnx {len(onnx.data.layers)}; "
          f"backend only {sorted((ta - tb).elements())}; onnx only {sorted((tb - ta).elements())}", flush=True)
    print(f"GRAPHS {name} b{batch}: backend-engine ctx graphs {backend_ctx.graphs_enabled} "
          f"({backend_ctx.graph_disabled_reason}); onnx ctx graphs {onnx_ctx.graphs_enabled} "
          f"({onnx_ctx.graph_disabled_reason})", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default="bert_base_seq128:1,gpt2_seq128:1")
    p.add_argument("--device", default="cuda", help="cpu: a check of this script on the tiny zoo models (fp32)")
    args = p.parse_args(argv)
    global DEVICE
    DEVICE = args.device
    for item in args.cases.split(","):
        name, batch = item.split(":")
        case(name, int(batch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
