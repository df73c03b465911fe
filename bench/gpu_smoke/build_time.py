"""GPU smoke (issue 15.3): where a cold build's time goes, and whether parallel Triton compiles shorten it.

Two cold fp16 builds of mobilenet_v3_large at batch 1 (bench/zoo.py's model and export), each in a fresh
process with a fresh TFG_CACHE_DIR and TRITON_CACHE_DIR: TFG_COMPILE_WORKERS=1, then =8. Each prints the build
seconds, the seconds spent waiting for compile workers, compiling in-process at first launch and timing
candidates, the distinct kernel variants, how many the workers compiled, and the engine's median latency
(CUDA graph replay, CUDA events). Checks: the workers compiled kernels and none failed (PASS build_time_workers),
workers=8 builds faster (PASS build_time_parallel), and its engine is no slower (PASS build_time_latency, 10 %).

    PYTHONPATH=. python3 bench/gpu_smoke/build_time.py
    BUILD_TIME_MODELS=convnext_tiny,vit_b_16 BUILD_TIME_WORKERS=14 python3 bench/gpu_smoke/build_time.py
        (vision zoo models at batch 1; one worker count: the cold builds alone on the machine, no checks)
    BUILD_TIME_PROFILE=40 ...   the child also prints the build's 40 costliest calls (cProfile, cumulative)
"""

import json
import os
import subprocess
import sys
import tempfile
import time

CHILD = r'''
import json, statistics, sys, time, torch
import tensorforge as tfg
from tensorforge.runtime import ExecutionContext
sys.path.insert(0, ".")
from bench.measure import cuda_times
data = open(sys.argv[1], "rb").read()
shape, vocab = json.loads(sys.argv[2])              # vocab: token ids in [0, vocab) instead of N(0, 1) floats
torch.zeros(1, device="cuda")                       # the CUDA context is not the build's cost
import cProfile, os, pstats
prof = cProfile.Profile() if os.environ.get("BUILD_TIME_PROFILE") else None
t0 = time.perf_counter()
if prof:
    prof.enable()
engine = tfg.build(data, fp16=True, shapes={"input": tuple(shape)}, device="cuda")
build_s = time.perf_counter() - t0
if prof:
    prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(int(os.environ["BUILD_TIME_PROFILE"]))
info = engine.data.build_info["tactics"]
ctx = ExecutionContext(engine.data, "cuda")
g = torch.Generator().manual_seed(1)
x = (torch.randint(0, vocab, shape, generator=g) if vocab else torch.randn(shape, generator=g)).cuda()
y = ctx.run({"input": x})["output"].float().cpu()
bound = ctx.bind_inputs({"input": x}) or {"input": x}
ms = statistics.median(cuda_times(lambda: ctx.run(bound, copy_outputs=False), iters=200, warmup=20))
import onnxruntime as ort
from bench.accuracy import cosine
ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"input": x.cpu().numpy()})[0]
print("RESULT" + json.dumps({"build_s": build_s, "tactics": info, "median_ms": ms,
                             "phases": engine.data.build_info.get("phases", {}),
                             "engine_s": engine.data.build_info.get("build_seconds", build_s), "cosine_vs_ort": cosine(y.numpy(), ref),
                             "chosen": [l.tactic for l in engine.data.layers]}))
'''


def export_model(path: str, name: str = "mobilenet_v3_large") -> None:
    sys.path.insert(0, os.getcwd())
    from bench import zoo
    data, _ = zoo.export(name, zoo.make(name))
    with open(path, "wb") as f:
        f.write(data)


def cold_build(onnx_path: str, workers: int, root: str, shape=(1, 3, 224, 224), vocab: int = 0) -> dict:
    """A cold fp16 build on CUDA in a fresh process with fresh caches under `root`: its seconds, tactic summary,
    engine median latency and the output's cosine to onnxruntime fp32 on one input (token ids below `vocab` when
    vocab > 0, else N(0, 1))."""
    env = dict(os.environ, TFG_COMPILE_WORKERS=str(workers), TFG_CACHE_DIR=os.path.join(root, f"tfg{workers}"),
               TRITON_CACHE_DIR=os.path.join(root, f"triton{workers}"), PYTHONPATH=os.getcwd())
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, onnx_path, json.dumps([list(shape), vocab])],
                          capture_output=True, text=True, env=env,
                          timeout=int(os.environ.get("BUILD_TIME_LIMIT_S", "150")))
    if proc.returncode != 0 or "RESULT" not in proc.stdout:
        raise RuntimeError(f"workers={workers} build failed: {proc.stderr[-2000:]}")
    if os.environ.get("BUILD_TIME_PROFILE"):
        print(proc.stdout.split("RESULT", 1)[0], flush=True)
    out = json.loads(proc.stdout.split("RESULT", 1)[1])
    out["process_s"] = time.perf_counter() - t0
    return out


def describe(workers: int, r: dict) -> str:
    t, k = r["tactics"], r["tactics"].get("kernels", {})
    return (f"workers={workers}: build {r['build_s']:.1f} s (process {r['process_s']:.1f} s): waiting for workers "
            f"{t.get('compile_wait_s', 0):.1f} s, compiling at first launch {k.get('inline', 0)} kernels in "
            f"{k.get('inline_s', 0):.1f} s, timing {t.get('timing_s', 0):.1f} s ({t['measurements']} candidates, "
            f"{t['timed_layers']} layers), queueing the workers' jobs {t.get('queue_s', 0):.1f} s, the rest of "
            f"tactic choice {t.get('other_s', 0):.1f} s, outside it {r['build_s'] - t.get('seconds', 0):.1f} s; "
            f"{k.get('variants', 0)} distinct variants, {k.get('workers', 0)} compiled "
            f"by the workers in {k.get('workers_compile_s', 0):.1f} CPU s, {k.get('failed', 0)} failed, "
            f"{k.get('new_entries', 0)} cache entries; engine median {r['median_ms'] * 1000:.1f} µs, "
            f"cosine to onnxruntime fp32 {r['cosine_vs_ort']:.5f}; build steps: "
            + ", ".join(f"{k} {v:.2f} s" for k, v in r.get("phases", {}).items())
            + f", parse (outside build_engine) {r['build_s'] - r.get('engine_s', r['build_s']):.2f} s"
            + (f"; network-context step {t['context'].get('seconds', 0)} s, {len(t['context'].get('kept', []))} swap(s)"
               if t.get("context") else ""))


def survey(models: list[str], workers: int) -> int:
    """Cold builds of several vision models, each alone on the machine (no prewarm beside it): where the time goes."""
    with tempfile.TemporaryDirectory() as root:
        for name in models:
            onnx_path = os.path.join(root, f"{name}.onnx")
            export_model(onnx_path, name)
            r = cold_build(onnx_path, workers, os.path.join(root, name))
            print(f"{name}: " + describe(workers, r), flush=True)
            for row in r["tactics"].get("slowest_layers", []):
                print(f"    {row['seconds']:7.2f} s  {row['op']:<16} {row['candidates']:3d} candidates  {row['layer']}")
    return 0


def main() -> int:
    models = [m for m in os.environ.get("BUILD_TIME_MODELS", "").split(",") if m]
    if models:
        return survey(models, int(os.environ.get("BUILD_TIME_WORKERS", "8")))
    failed = False
    with tempfile.TemporaryDirectory() as root:
        onnx_path = os.path.join(root, "mobilenet_v3_large.onnx")
        t0 = time.perf_counter()
        export_model(onnx_path)
        print(f"export {time.perf_counter() - t0:.1f} s")
        results = {}
        for workers in (1, 8):
            results[workers] = cold_build(onnx_path, workers, root)
            print(describe(workers, results[workers]), flush=True)
    one, eight = results[1], results[8]
    k8 = eight["tactics"].get("kernels", {})
    checks = [
        ("build_time_workers", k8.get("workers", 0) > 0 and k8.get("failed", 1) == 0,
         f"{k8.get('workers', 0)} kernels compiled by 8 workers, {k8.get('failed')} failed, "
         f"{k8.get('inline', 0)} compiled at first launch"),
        ("build_time_parallel", eight["build_s"] < one["build_s"],
         f"cold build {one['build_s']:.1f} s with 1 worker, {eight['build_s']:.1f} s with 8 "
         f"({one['build_s'] / max(eight['build_s'], 1e-9):.2f}x)"),
        ("build_time_latency", eight["median_ms"] <= 1.10 * one["median_ms"],
         f"engine median {one['median_ms'] * 1000:.1f} µs (1 worker) vs {eight['median_ms'] * 1000:.1f} µs (8)"),
    ]
    differ = sum(a != b for a, b in zip(one["chosen"], eight["chosen"]))
    print(f"tactics: {differ} of {len(one['chosen'])} layers chose differently (timing noise between the builds)")
    for name, ok, detail in checks:
        print(f"{'PASS' if ok else 'FAIL'} {name} {detail}")
        failed |= not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
