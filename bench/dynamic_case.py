"""Case 6 of BENCH.md: an engine built with a range profile against engines built statically, at min, opt and max.

Entry point: `run_model(name, onnx_bytes, ...)` → rows, one per profile point. Profile: batch 1..32 with opt 8; text
models also range over the sequence (POINTS_TEXT; their ONNX export has a dynamic sequence axis, zoo.export
dynamic_seq=True). The dynamic engine runs in one ExecutionContext (a CUDA graph per input shape, as a user runs it);
each static engine is built for exactly that point. ratio = dynamic ÷ static median latency (target ≤ 1.05); the
outputs of the two engines are compared too (cosine), so a fast but wrong dynamic path cannot pass unseen.
"""

import time

import tensorforge as tfg
from tensorforge.runtime import ExecutionContext

import zoo
from accuracy import cosine
from measure import timer
from zoo_case import build_summary, engine_runner, graph_columns

POINTS_VISION = {"min": 1, "opt": 8, "max": 32}                          # batch
POINTS_TEXT = {"min": (1, 32), "opt": (8, 64), "max": (32, 128)}        # (batch, sequence)
TARGET = 1.05


def points(name: str) -> dict[str, tuple[int, ...]]:
    spec = zoo.ZOO[name]
    if spec.family == "vision":
        return {k: zoo.input_shape(name, b) for k, b in POINTS_VISION.items()}
    scale = spec.seq / 128                                  # tiny models: the same fractions of their sequence
    return {k: (b, max(2, int(s * scale))) for k, (b, s) in POINTS_TEXT.items()}


def _example(name: str, shape: tuple[int, ...]):
    if zoo.ZOO[name].family == "vision":
        return zoo.example(name, shape[0])
    return zoo.example(name, shape[0], seq=shape[1])


def run_model(name: str, onnx_bytes: bytes, dtype: str, iters: int, warmup: int, cache_path: str | None, log,
              device: str = "cuda") -> list[dict]:
    pts = points(name)
    fp16 = dtype == "fp16"
    t0 = time.perf_counter()
    dyn = tfg.build(onnx_bytes, fp16=fp16, shapes={"input": (pts["min"], pts["opt"], pts["max"])}, device=device,
                    timing_cache=cache_path)
    dyn_build = build_summary(dyn)
    log(f"{name} {dtype}: dynamic engine {pts['min']}..{pts['max']} (opt {pts['opt']}) built in "
        f"{time.perf_counter() - t0:.1f} s")
    dctx = ExecutionContext(dyn.data, device)
    time_fn = timer(device, iters, warmup)
    rows = []
    for point, shape in pts.items():
        t_case = time.perf_counter()
        row = {"model": name, "dtype": dtype, "point": point, "shape": list(shape),
               "profile": [list(pts["min"]), list(pts["opt"]), list(pts["max"])]}
        try:
            x = _example(name, shape).to(device)
            static = tfg.build(onnx_bytes, fp16=fp16, shapes={"input": shape}, device=device, timing_cache=cache_path)
            sctx = ExecutionContext(static.data, device)
            row["dynamic"] = time_fn(engine_runner(dctx, x, device))
            row["static"] = time_fn(engine_runner(sctx, x, device))
            row["dynamic_graphs"] = graph_columns(dctx)
            row["static_graphs"] = graph_columns(sctx)
            yd = dctx.run({"input": x})["output"].float().cpu().numpy()
            ys = sctx.run({"input": x})["output"].float().cpu().numpy()
            row["cosine_dynamic_vs_static"] = cosine(yd, ys)
            row["ratio_dynamic_vs_static"] = round(row["dynamic"]["median_ms"] / row["static"]["median_ms"], 3)
            row["within_target"] = row["ratio_dynamic_vs_static"] <= TARGET
            row["static_build"] = build_summary(static)
            row["dynamic_build"] = dyn_build
            del sctx, static
        except Exception as e:  # noqa: BLE001 - recorded, the run goes on
            row["error"] = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:240]}"
        row["elapsed_s"] = round(time.perf_counter() - t_case, 1)
        log(f"{name} {dtype} {point} {shape}: " + (row.get("error") or
            f"dynamic {row['dynamic']['median_ms']:.4f} ms, static {row['static']['median_ms']:.4f} ms, "
            f"ratio {row['ratio_dynamic_vs_static']}; {row['elapsed_s']} s"))
        rows.append(row)
    return rows
