"""The prewarm phase of a run of record: compile everything the run will compile, in parallel, before it is timed.

    PYTHONPATH=. python3 bench/prewarm.py --cache-dir D --models resnet50,... --batches 1,32 --dtypes fp16 \
        [--max-autotune resnet50:32] [--workers 8] [--budget-s 200]
    PYTHONPATH=. python3 bench/run.py --prewarmed D ...          # then the run itself, one case at a time
    --dtypes int8,fp8 (with --peers ""): the calibrated INT8/FP8 builds of precision rows, whose Triton variants
    are most of those rows' time (35–130 s for a model's first INT8 or FP8 build on the H100)

Why: a run of record spends most of its time compiling (torch.compile ≈ 15–28 s per peer per case, our cold builds
up to 59 s), single-threaded Python mostly, while 15 of the GPU machine's 16 cores idle. Here one worker process
per (model, batch, dtype) job — run `--workers` at a time — fills the on-disk caches the run then reads: Triton's
and inductor's (TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR: generated code, compiled kernels, FX graphs) and ours
(TFG_CACHE_DIR: compiled tactic variants), and writes each model's ONNX export once (D/exports). Nothing that
decides speed is carried over: our builds here use a throwaway timing cache, and run.py turns inductor's autotune
cache off, so every tactic and every Triton config is chosen again in the run on an idle GPU.

What the prewarm measures is itself a result: each job's cold times (our build with cold kernel and timing caches,
torch.compile default and with freezing, first call synchronised) go to D/prewarm.json, and run.py reports them as
the build-cost table's cold columns — measured with `--workers` jobs sharing the machine, which the table says.
A job that outlives the budget is killed and listed; the run then compiles that case itself (slower, same result).
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def cache_env(cache_dir: str) -> dict[str, str]:
    """The cache folders of a prewarmed run (set before torch/triton/tensorforge are imported)."""
    return {"TRITON_CACHE_DIR": os.path.join(cache_dir, "triton"),
            "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache_dir, "inductor"),
            "TFG_CACHE_DIR": os.path.join(cache_dir, "tfg")}


def export_path(cache_dir: str, model: str) -> str:
    return os.path.join(cache_dir, "exports", f"{model}.onnx")


def load_export(cache_dir: str, model: str) -> tuple[bytes, str] | None:
    """(ONNX bytes, exporter) written by a prewarm job, or None."""
    path = export_path(cache_dir, model)
    meta = path + ".json"
    if not (os.path.exists(path) and os.path.exists(meta)):
        return None
    with open(path, "rb") as f, open(meta) as g:
        return f.read(), json.load(g)["exporter"]


def load_summary(cache_dir: str) -> dict | None:
    path = os.path.join(cache_dir, "prewarm.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


QUANTIZED = ("int8", "fp8")      # --dtypes entries that prewarm a precision row's build (bench/precision_case.py)


def jobs_of(models: list[str], batches: list[int], dtypes: list[str]) -> list[tuple[str, int, str]]:
    """Dtypes in the order given (the run measures them in that order), longest first within one (mobilenet and
    efficientnet builds dominate), so the slowest jobs start at once."""
    import plan
    jobs = [(m, b, d) for m in models for b in batches for d in dtypes]
    return sorted(jobs, key=lambda j: (dtypes.index(j[2]), -(plan.build_s(j[0], 1, j[2]) + plan.COMPILE_S.get(j[0], 10.0))))


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache-dir", required=True)
    p.add_argument("--models", default="")
    p.add_argument("--batches", default="1,32")
    p.add_argument("--dtypes", default="fp16")
    p.add_argument("--peers", default="compile,freeze,backend", help="what each job compiles beside our build")
    p.add_argument("--max-autotune", default="", help="model:batch[:dtype] jobs that also compile max-autotune")
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: the tests' smoke of the harness")
    p.add_argument("--budget-s", type=float, default=240.0)
    p.add_argument("--job", default=None, help=argparse.SUPPRESS)       # model:batch:dtype (a worker)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    os.makedirs(os.path.join(args.cache_dir, "exports"), exist_ok=True)
    os.makedirs(os.path.join(args.cache_dir, "jobs"), exist_ok=True)
    if args.job:
        model, batch, dtype = args.job.split(":")
        return run_job(args, model, int(batch), dtype)
    return run_all(args)


def run_all(args) -> int:
    models = [m for m in args.models.split(",") if m]
    jobs = jobs_of(models, [int(b) for b in args.batches.split(",") if b], [d for d in args.dtypes.split(",") if d])
    workers = max(1, min(args.workers, len(jobs)))
    share = str(max(1, (os.cpu_count() or 2) // workers))     # each job's compile processes: the cores / jobs
    env = dict(os.environ, **cache_env(args.cache_dir), PYTHONPATH=os.environ.get("PYTHONPATH", "."),
               TORCHINDUCTOR_COMPILE_THREADS=share)
    # our builds' Triton compile workers likewise (a build alone takes half the cores, ≤ 8: at ffb3b2a 14 jobs
    # started 8 each on 16 cores and none of the 14 finished inside the 230 s budget)
    env.setdefault("TFG_COMPILE_WORKERS", share)
    t0 = time.perf_counter()
    pending, running, done = [], {}, {}
    for job in jobs:                        # a job finished by an earlier prewarm into the same folder stays done
        key = ":".join(map(str, job))
        prior = _job_result(args.cache_dir, key)
        if prior and "total_s" in prior:
            done[key] = {"status": "ok", "earlier": True}
        else:
            pending.append(job)
    print(f"prewarm: {len(jobs)} jobs, {workers} at a time, budget {args.budget_s:.0f} s", flush=True)
    while pending or running:
        while pending and len(running) < workers:
            job = pending.pop(0)
            key = ":".join(map(str, job))
            log = open(os.path.join(args.cache_dir, "jobs", key.replace(":", "_") + ".log"), "w")
            cmd = [sys.executable, os.path.abspath(__file__), "--cache-dir", args.cache_dir, "--job", key,
                   "--peers", args.peers, "--max-autotune", args.max_autotune, "--device", args.device]
            running[key] = (subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT), log,
                            time.perf_counter())
        time.sleep(0.5)
        over = time.perf_counter() - t0 > args.budget_s
        for key, (proc, log, started) in list(running.items()):
            if proc.poll() is None and not over:
                continue
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
            rc = proc.returncode
            done[key] = {"rc": rc, "wall_s": round(time.perf_counter() - started, 1),
                         "status": "ok" if rc == 0 else "killed at the budget" if over else f"failed (rc {rc})"}
            print(f"[{time.perf_counter() - t0:6.1f}s] prewarm {key}: {done[key]['status']} in "
                  f"{done[key]['wall_s']} s", flush=True)
            del running[key]
        if over:
            for job in pending:
                done[":".join(map(str, job))] = {"status": "not started (budget)"}
            pending = []
    summary = {"workers": workers, "jobs": len(jobs), "wall_s": round(time.perf_counter() - t0, 1),
               "cpu_count": os.cpu_count(), "compile_threads_per_job": env["TORCHINDUCTOR_COMPILE_THREADS"],
               "tfg_compile_workers_per_job": env["TFG_COMPILE_WORKERS"],
               "results": {}}
    for key, status in done.items():
        summary["results"][key] = dict(status, **(_job_result(args.cache_dir, key) or {}))
    with open(os.path.join(args.cache_dir, "prewarm.json"), "w") as f:
        json.dump(summary, f, indent=1)
    ok = sum(1 for e in summary["results"].values() if e.get("status") == "ok")
    print(f"prewarm: {ok} of {len(jobs)} jobs done in {summary['wall_s']} s", flush=True)
    return 0


def _job_result(cache_dir: str, key: str) -> dict | None:
    path = os.path.join(cache_dir, "jobs", key.replace(":", "_") + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def run_job(args, model: str, batch: int, dtype: str) -> int:
    """One worker: export (the model's first job writes it), build our engine, compile the torch peers — each timed
    cold, first call synchronised. Results → D/jobs/<model>_<batch>_<dtype>.json, written after every step."""
    import copy

    import torch

    import peers
    import zoo
    import tensorforge as tfg
    from tensorforge.util import log as tflog
    tflog.set_severity(tflog.Severity.WARNING)
    dev = args.device
    if dev == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    out_path = os.path.join(args.cache_dir, "jobs", f"{model}_{batch}_{dtype}.json")
    out: dict = {"model": model, "batch": batch, "dtype": dtype}

    def save():
        with open(out_path + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        os.replace(out_path + ".tmp", out_path)

    def step(name, fn):
        t0 = time.perf_counter()
        try:
            fn()
            if dev == "cuda":
                torch.cuda.synchronize()
            out[name] = round(time.perf_counter() - t0, 3)
        except Exception as e:  # noqa: BLE001 - recorded; the run compiles this one itself
            out[name] = {"error": f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"}
        print(f"{model} b{batch} {dtype} {name}: {out[name]}", flush=True)
        save()

    t0 = time.perf_counter()
    module = zoo.make(model)
    path = export_path(args.cache_dir, model)
    if not os.path.exists(path + ".json"):          # first job of the model: write the export (atomically)
        data, exporter = zoo.export(model, module, path + f".{os.getpid()}.tmp")
        os.replace(path + f".{os.getpid()}.tmp", path)
        with open(path + ".json", "w") as f:
            json.dump({"exporter": exporter}, f)
    else:
        data, _ = load_export(args.cache_dir, model)
    out["export_s"] = round(time.perf_counter() - t0, 3)
    if dtype in QUANTIZED:        # a precision row's engine: its calibrated INT8/FP8 build compiles the variants
        import precision_case

        def build():
            out["engine_flags"] = precision_case.build_engine(data, model, batch, dtype, dev, None).data.build_info.get(
                "flags", [])
        step("tensorforge_build_s", build)
        out["total_s"] = round(time.perf_counter() - t0, 3)
        save()
        return 0
    x_cpu = zoo.example(model, batch)
    shape = {"input": tuple(x_cpu.shape)}
    fp16 = dtype == "fp16"
    step("tensorforge_build_s", lambda: tfg.build(data, fp16=fp16, shapes=shape, device=dev))
    if dtype == "fp32":
        step("tensorforge_build_notf32_s", lambda: tfg.build(data, shapes=shape, device=dev, tf32=False))
    x = x_cpu.to(dev)
    half = copy.deepcopy(module).to(dev)
    xp = x
    if fp16:
        half = half.half()
        xp = x.half() if x.is_floating_point() else x
    wanted = [p for p in args.peers.split(",") if p and (p != "backend" or fp16)]    # run.py --backend: fp16 rows
    if (model, batch, dtype) in {_key(k) for k in args.max_autotune.split(",") if k}:
        wanted.append("max-autotune")
    for family in wanted:
        if family == "backend":
            import tensorforge.frontend_torch as ft
            engine_module = copy.deepcopy(module).to(dev)
            before = len(ft.reports())
            step("backend_compile_s", lambda: _first_call(engine_module, x, None, False, backend=True, fp16=fp16))
            built = ft.reports()[before:]               # what the backend made of the model: graphs, engines, breaks
            out["backend_graphs"], out["backend_engines"] = len(built), sum(r.engines for r in built)
            out["backend_breaks"] = sorted({f"{op}: {why}"[:160] for r in built for _, op, why in r.breaks})
        else:
            mode, freezing, _ = peers.COMPILED[family]
            step(f"{family}_compile_s", lambda: _first_call(half, xp, mode, freezing))
        peers.reset_compiler()
    out["total_s"] = round(time.perf_counter() - t0, 3)
    save()
    return 0


def _key(item: str) -> tuple[str, int, str]:
    parts = item.split(":")
    return parts[0], int(parts[1]), parts[2] if len(parts) == 3 else "fp16"


def _first_call(model, x, mode, freezing: bool, backend: bool = False, fp16: bool = True) -> None:
    """torch.compile as the peers do (peers._compiled_peer), up to the end of the first call."""
    import torch

    import peers
    if backend:
        import tensorforge.frontend_torch  # noqa: F401 - registers the backend
        compiled = torch.compile(model, backend="tensorforge", options={"fp16": fp16}, dynamic=False)
        with torch.inference_mode():
            compiled(x)
        return
    grad_ctx = torch.no_grad if freezing else torch.inference_mode
    with peers.inductor_freezing(freezing):
        compiled = torch.compile(model, mode=mode) if mode else torch.compile(model)
        with grad_ctx():
            compiled(x)


if __name__ == "__main__":
    sys.exit(main())
