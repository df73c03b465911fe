"""GPU smoke (issue 14.6): torch.compile(backend="tensorforge") on a ResNet-like and a BERT-like block, fp16,
batch 1 and 32, timed in one run against torch.compile's default backend (inductor, mode="reduce-overhead":
CUDA graphs) and against our ONNX path (tfg.build of the same module via torch.onnx.export, fp16).
Correctness: each result against eager fp32 PyTorch, max|y − ref| / max|ref| < 2e-2 (fp16 arithmetic); the
graph-break check runs a model with torch.cumsum and must report the break and still match; the dynamic check
runs a small block at batches 2, 3, 6, 5 and must build one profiled engine for 3..6.
Diagnosis printed beside the times: the layer-op counts of both engines (and a check that they are equal), where
their (op, tactic) lists differ, whether each runs in a CUDA graph (and why not), and a per-call breakdown of the
backend: its engine through Engine.__call__ (the ONNX path's API), its EngineCall alone, and dynamo's own floor
(torch.compile with a backend that returns a fixed tensor), so engine, wrapper and dynamo costs are separable.
Prints PASS/FAIL per check and the median milliseconds per call; exits 1 on any FAIL.

    PYTHONPATH=. python3 bench/gpu_smoke/torch_compile_backend.py
"""

import sys
import time
from collections import Counter

import torch
import torch.nn as nn
import torch.nn.functional as F

import tensorforge as tfg
import tensorforge.frontend_torch as ft

FAILS = []


def check(name, ok, detail=""):
    print(f"{'PASS' if ok else 'FAIL'} {name} {detail}", flush=True)
    if not ok:
        FAILS.append(name)


class Basic(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNetLike(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.blocks = nn.Sequential(Basic(64, 64, 1), Basic(64, 128, 2), Basic(128, 256, 2))
        self.fc = nn.Linear(256, 1000)

    def forward(self, x):
        return self.fc(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1).flatten(1))


class BertLike(nn.Module):
    def __init__(self, d=768, h=12):
        super().__init__()
        self.h = h
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.f1, self.f2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        qkv = self.qkv(x).view(b, t, 3 * self.h, d // self.h).transpose(1, 2)
        q, k, v = qkv[:, :self.h], qkv[:, self.h:2 * self.h], qkv[:, 2 * self.h:]
        a = torch.softmax(q @ k.transpose(-1, -2) * (d // self.h) ** -0.5, dim=-1) @ v
        x = self.ln1(x + self.o(a.transpose(1, 2).reshape(b, t, d)))
        return self.ln2(x + self.f2(F.gelu(self.f1(x))))


class WithCumsum(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(64, 64), nn.Linear(64, 64)

    def forward(self, x):
        return self.b(torch.cumsum(F.relu(self.a(x)), dim=1))


def timed(fn, x, iters=50):
    with torch.no_grad():
        for _ in range(10):
            fn(x)
        torch.cuda.synchronize()
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn(x)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2] * 1e3


def rel(y, ref):
    y = y[0] if isinstance(y, (tuple, list)) else y
    return ((y.float() - ref.float()).abs().max() / ref.float().abs().max().clamp_min(1e-6)).item()


def ops(engine):
    return dict(sorted(Counter(layer.op for layer in engine.data.layers).items()))


def graph_state(ctx):
    if ctx is None:
        return "no context yet"
    if ctx.graphs_enabled:
        cache = ctx.graph_cache
        return f"cuda-graph on ({cache.captures} capture(s), {sum(g.replays for g in cache.graphs.values())} replays)"
    return f"cuda-graph OFF: {ctx.graph_disabled_reason}"


def diagnose(name, report, onnx_engine):
    fx = report.built[0]
    a, b = ops(fx), ops(onnx_engine)
    print(f"LAYERS {name}: backend {len(fx.data.layers)} layers {a}", flush=True)
    print(f"LAYERS {name}: onnx-path {len(onnx_engine.data.layers)} layers {b}", flush=True)
    ta = Counter((layer.op, layer.tactic) for layer in fx.data.layers)
    tb = Counter((layer.op, layer.tactic) for layer in onnx_engine.data.layers)
    if ta != tb:
        print(f"TACTICS {name}: backend only {sorted((ta - tb).elements())}; onnx-path only "
              f"{sorted((tb - ta).elements())}", flush=True)
    print(f"INPUTS {name}: backend {fx.data.input_names}, onnx-path {onnx_engine.data.input_names}", flush=True)
    check(f"{name} same-fused-network", a == b and len(fx.data.input_names) == len(onnx_engine.data.input_names))


def bench(name, model, shape):
    torch.manual_seed(0)
    model = model.eval().cuda()
    x = torch.randn(*shape, device="cuda")
    with torch.no_grad():
        ref = model(x)
        torch._dynamo.reset()
        t0 = time.perf_counter()
        ours = torch.compile(model, backend="tensorforge", options={"fp16": True}, dynamic=False)
        y = ours(x)
        build_s = time.perf_counter() - t0
        report = ft.last_report()
        e = rel(y, ref)
        check(f"{name} tensorforge-backend", e < 2e-2 and not report.breaks, f"rel_err={e:.2e} {report.engines} engine(s)")
        t_ours = timed(ours, x)
        call = report.calls[0]
        args = [x if n in call.feeds else None for n in call.arg_names]
        t_call = timed(lambda _: call(*args), x)
        fx_engine = report.built[0]
        t_fx_api = timed(fx_engine, x)
        fixed = tuple(o.clone() for o in (y if isinstance(y, tuple) else (y,)))
        torch._dynamo.reset()
        floor = torch.compile(model, backend=lambda gm, ex: (lambda *a: fixed), dynamic=False)
        floor(x)
        t_floor = timed(floor, x)
        onnx_engine = tfg.build(model, fp16=True, example_inputs=(x,), device="cuda")
        e = rel(onnx_engine(x), ref)
        check(f"{name} onnx-path", e < 2e-2, f"rel_err={e:.2e}")
        t_onnx = timed(onnx_engine, x)
        diagnose(name, report, onnx_engine)
        ctx = getattr(call._local, "ctx", None)
        print(f"GRAPHS {name}: backend {graph_state(ctx)}; onnx-path {graph_state(onnx_engine.context)}", flush=True)
        check(f"{name} backend-cuda-graph", ctx is not None and ctx.graphs_enabled, graph_state(ctx))
        half, xh = model.half(), x.half()
        torch._dynamo.reset()
        ind = torch.compile(half, mode="reduce-overhead", dynamic=False)
        e = rel(ind(xh), ref)
        check(f"{name} inductor-cudagraph", e < 2e-2, f"rel_err={e:.2e}")
        t_ind = timed(ind, xh)
        model.float()
    print(f"TIME {name}: tensorforge-backend {t_ours:.3f} ms (build {build_s:.1f} s), onnx-path {t_onnx:.3f} ms, "
          f"inductor+cudagraph {t_ind:.3f} ms", flush=True)
    print(f"BREAKDOWN {name}: backend engine via Engine.__call__ {t_fx_api:.3f} ms, its EngineCall alone "
          f"{t_call:.3f} ms, dynamo floor (fixed-output backend) {t_floor:.3f} ms", flush=True)
    check(f"{name} backend-not-slower-than-onnx-path", t_ours <= t_onnx * 1.10, f"{t_ours:.3f} vs {t_onnx:.3f} ms")
    check(f"{name} backend-faster-than-inductor", t_ours < t_ind, f"{t_ours:.3f} vs {t_ind:.3f} ms")


def dynamic_check():
    """Batches 2, 3, 6, 5 of a small block: dynamo's second shape makes the batch dynamic; one engine (3..6 within
    its profile) then serves 3, 6 and 5, each in its own captured graph."""
    torch.manual_seed(0)
    m = BertLike(d=256, h=4).eval().cuda()
    torch._dynamo.reset()
    f = torch.compile(m, backend="tensorforge", options={"fp16": True})
    before = len(ft.reports())
    worst = 0.0
    t0 = time.perf_counter()
    with torch.no_grad():
        for batch in (2, 3, 6, 5):
            x = torch.randn(batch, 64, 256, device="cuda")
            worst = max(worst, rel(f(x), m(x)))
    new = ft.reports()[before:]
    profiles = new[-1].built[0].data.profiles if new else []
    state = graph_state(getattr(new[-1].calls[0]._local, "ctx", None)) if new and new[-1].calls else "?"
    check("dynamic-batch one-profiled-engine", len(new) == 2 and worst < 2e-2,
          f"reports={len(new)} rel_err={worst:.2e} profile={profiles} {state} ({time.perf_counter() - t0:.1f} s)")


def main():
    if not torch.cuda.is_available():
        print("FAIL no-cuda")
        return 1
    t0 = time.perf_counter()
    for batch in (1, 32):
        bench(f"resnet_like_b{batch}", ResNetLike(), (batch, 3, 224, 224))
        bench(f"bert_like_b{batch}", BertLike(), (batch, 128, 768))
    dynamic_check()
    m, x = WithCumsum().eval().cuda(), torch.randn(4, 16, 64, device="cuda")
    with torch.no_grad():
        torch._dynamo.reset()
        y = torch.compile(m, backend="tensorforge", options={"fp16": True}, dynamic=False)(x)
        rep = ft.last_report()
        e = rel(y, m(x))
    check("graph-break cumsum", e < 2e-2 and [op for _, op, _ in rep.breaks] == ["aten.cumsum.default"],
          f"rel_err={e:.2e} breaks={rep.breaks}")
    print(f"total {time.perf_counter() - t0:.1f} s")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
