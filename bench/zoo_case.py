"""Case 2 of BENCH.md: one zoo model at one batch size and precision — the tensorforge engine and the torch peers
timed side by side, the engine's accuracy against onnxruntime fp32 on the CPU at this batch, and a per-layer profile.

Entry point: `run_case(name, module, onnx_bytes, dtype, batch, ...)` → dict (one row of the results table).
The engine is built from the fp32 ONNX export with --fp16 semantics for "fp16" (inputs and outputs stay fp32, as
TensorRT does); the peers run the module converted with .half() on half inputs. fp32 runs allow TF32 everywhere
(trtexec's default); their accuracy is also checked on an engine built with `tf32=False`, which must meet
allclose(rtol 1e-3, atol 1e-4). The rules are in accuracy.py (documented in bench/README.md).
"""

import copy
import time
from collections import Counter

import numpy as np
import torch

import tensorforge as tfg
from tensorforge.runtime import ExecutionContext
from tensorforge.runtime.profiler import profile_layers

import zoo
from accuracy import compare, judge_against_torch_fp16, strict_fp32  # noqa: F401 - compare is re-exported for tests
from measure import timer
from peers import BACKEND, ratios, time_peers


def ort_reference(onnx_bytes: bytes, x: np.ndarray, threads: int = 8) -> np.ndarray:
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(onnx_bytes, opts, providers=["CPUExecutionProvider"])
    return sess.run(None, {"input": x})[0]


def build_summary(engine) -> dict:
    info = engine.data.build_info
    return {"seconds": info.get("build_seconds"), "tactics": info.get("tactics"), "memory": info.get("memory"),
            "layers": len(engine.data.layers),
            "device_layers": sum(layer.placement != "host" for layer in engine.data.layers),
            "tactics_chosen": dict(Counter(layer.tactic for layer in engine.data.layers)),
            "layer_precisions": dict(Counter(str(getattr(layer, "precision", None)) for layer in engine.data.layers)),
            "flags": list(info.get("flags", [])),
            "best": {k: v for k, v in (info.get("best") or {}).items() if k in ("kept", "mixed_ms", "fp16_ms", "why")}}


def graph_columns(ctx) -> dict:
    """Whether the engine runs under CUDA graphs and, when not, which layers blocked the capture."""
    blockers = [b["layer"] for b in getattr(ctx, "graph_blockers", [])]
    return {"graphs": ctx.graphs_enabled, "graph_note": ctx.graph_disabled_reason,
            "graph_blockers": blockers, "graph_blocker_count": len(blockers)}


def engine_runner(ctx, x, device: str):
    """The engine as the graph peers run: inputs written into the graph's static buffers, static outputs read."""
    bound = ctx.bind_inputs({"input": x}) or {"input": x}
    return lambda: ctx.run(bound, copy_outputs=False)


def run_case(name: str, module: torch.nn.Module, onnx_bytes: bytes, dtype: str, batch: int, iters: int,
             warmup: int, peers: list[str], cache_path: str | None, profile: bool, log, device: str = "cuda",
             engine=None, ort_threads: int = 8, backend: bool = False, kernel_profile: bool = False) -> dict:
    """`engine`: one already built for this case (the build-cost case hands its cold build over), else built here.
    `backend`: also time the model through torch.compile(backend="tensorforge") (runner `tf-backend`).
    `kernel_profile` (CUDA): after each is timed, our engine's graph and every compiled peer's graph are replayed
    under torch.profiler (kernel_profile.kernel_table): kernels, kernel µs, gaps, top kernels — `kernel_profiles`."""
    t_case = time.perf_counter()
    row: dict = {"model": name, "batch": batch, "dtype": dtype}
    x_cpu = zoo.example(name, batch)
    if engine is None:
        engine = tfg.build(onnx_bytes, fp16=(dtype == "fp16"), shapes={"input": tuple(x_cpu.shape)}, device=device,
                           timing_cache=cache_path)
    row["build"] = build_summary(engine)
    ctx = ExecutionContext(engine.data, device)
    x = x_cpu.to(device)
    run_engine = engine_runner(ctx, x, device)
    row.update(graph_columns(ctx))
    # accuracy at this batch: engine vs onnxruntime fp32 on the same input
    got = ctx.run({"input": x})["output"].float().cpu().numpy()
    want = ort_reference(onnx_bytes, x_cpu.numpy(), ort_threads)
    row["accuracy_vs_ort_fp32"] = compare(got, want, dtype == "fp16")
    if dtype == "fp32":
        row["accuracy_tf32_off"] = _tf32_off_check(onnx_bytes, x_cpu, want, device, cache_path)
        log(f"{name} b{batch} fp32: TF32 off vs onnxruntime: {row['accuracy_tf32_off']}")
    if profile:
        prof = profile_layers(ctx, {"input": x}, iterations=10)
        rows = sorted(prof.rows(), key=lambda r: -r["timeMs"])
        row["profile_top"] = [{k: (round(v, 5) if isinstance(v, float) else v) for k, v in r.items()} for r in rows[:12]]
        row["profile_ops"] = _by_op(engine.data, prof)
    model = copy.deepcopy(module).to(device)
    xp = x
    if dtype == "fp16":
        model = model.half()
        xp = x.half() if x.is_floating_point() else x
    torch_fp16 = None                       # PyTorch's own fp16 error: the second clause, for both of our runners
    if "rel_to_max" in row["accuracy_vs_ort_fp32"] and dtype == "fp16":
        try:
            with torch.inference_mode():    # PyTorch's own fp16 run of the model: the error fp16 itself costs
                peer = model(xp).float().cpu().numpy()
            torch_fp16 = compare(peer, want, True)
            judge_against_torch_fp16(row["accuracy_vs_ort_fp32"], torch_fp16)
        except Exception as e:  # noqa: BLE001 - the engine's own numbers stand; the comparison is reported missing
            row["accuracy_vs_ort_fp32"]["torch_fp16_error"] = f"{type(e).__name__}: {str(e)[:200]}"
    time_fn = timer(device, iters, warmup)
    times = {"tensorforge": time_fn(run_engine, keep_raw=True)}
    log(f"{name} b{batch} {dtype}: tensorforge {times['tensorforge']['median_ms']:.4f} ms "
        f"(spread {times['tensorforge']['spread_pct']}%)")
    profiles: dict = {}
    profile = None
    if kernel_profile and device == "cuda":
        import kernel_profile as kp

        def profile(runner_name, fn):
            try:
                profiles[runner_name] = kp.kernel_table(fn, 10)
            except Exception as e:  # noqa: BLE001 - the times stand; the profile is reported missing
                profiles[runner_name] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
        profile("tensorforge", run_engine)
    del run_engine, ctx
    if backend:
        import backend_runner
        times[BACKEND] = backend_runner.time_backend(copy.deepcopy(module).to(device), x, dtype == "fp16", time_fn,
                                                     log, want, torch_fp16)
    times.update(time_peers(model, (xp,), peers, time_fn, log, cuda=(device == "cuda"), profile=profile))
    row["runners"] = times
    if profiles:
        row["kernel_profiles"] = profiles
    row["peers_not_run"] = [p for p in _all_peers() if p not in peers] + ([] if backend else [BACKEND])
    row.update(ratios(times))
    row["elapsed_s"] = round(time.perf_counter() - t_case, 1)
    log(f"{name} b{batch} {dtype}: strongest peer {row['strongest_peer']} → tf/strongest {row['ratio_vs_strongest']}, "
        f"tf/(compile+graph) {row['ratio_vs_compile_graph']}; case took {row['elapsed_s']} s")
    return row                  # the caller releases compiled graphs and memory (run.py: release())


def _all_peers():
    from peers import PEERS
    return PEERS


def _tf32_off_check(onnx_bytes, x_cpu, want, device, cache_path) -> dict:
    """fp32 engine built with TF32 off, run on the same input: allclose(1e-3, 1e-4) against onnxruntime fp32."""
    try:
        eng = tfg.build(onnx_bytes, shapes={"input": tuple(x_cpu.shape)}, device=device, tf32=False,
                        timing_cache=cache_path + ".notf32" if cache_path else None)
        got = eng.run({"input": x_cpu.to(device)})["output"].float().cpu().numpy()
        out = strict_fp32(got, want)
        out["build_seconds"] = eng.data.build_info.get("build_seconds")
        return out
    except Exception as e:  # noqa: BLE001 - recorded in the row
        return {"pass": False, "note": f"not run: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"}


def _by_op(engine, prof) -> dict:
    """Share of the profiled time per op type (where the remaining time goes)."""
    ops: dict[str, float] = {}
    for layer, t in zip(engine.layers, prof.times_ms):
        ops[layer.op] = ops.get(layer.op, 0.0) + sum(t) / max(len(t), 1)
    return {k: round(v, 5) for k, v in sorted(ops.items(), key=lambda kv: -kv[1])}
