"""Case 4 of BENCH.md: INT8, FP8 and `best` engines beside our own fp16 engine, same model, same batch, same run.

Entry point: `run_model(name, onnx_bytes, batches, precisions, ...)` → rows, one per (batch, precision), fp16 first.
Builds: `tfg.build(onnx, fp16=True, int8=True, calibration_data=feeds, shapes=..., device=...)`; `fp8=True` likewise;
`best=True` (every precision allowed). INT8/FP8 rows also allow fp16 for the layers they do not quantize (trtexec's
`--int8 --fp16`, how TensorRT's INT8 numbers are measured). A build that raises gives a row "not run: <error>".
Calibration: CALIB_INPUTS inputs (seeds CALIB_SEED…), fed at the engine's batch (calibration runs the network at
its build shapes; a batch above CALIB_INPUTS repeats them), distinct from the TEST_INPUTS test inputs (seed
TEST_SEED) and from the timing input (seeded by the batch size). Accuracy:
every engine runs the test set (in chunks of its batch; a batch larger than the set repeats it) and is compared with
fp32 onnxruntime on the same inputs: cosine (target ≥ 0.99) and, for classifiers, top-1 agreement (accuracy.py).
INT8 rows also carry onnxruntime's own INT8 of the model (ort_int8.py: same placement and scheme, same calibration
and test inputs), scored the same way: whether a miss belongs to per-tensor INT8 itself or to our engine.
Throughput = batch / median latency; speedup = fp16 median ÷ this engine's median (same run).
Spec rows (`int8-spec`, `fp8-spec`): the INT8/FP8 engine with the layers of the model's `--layerPrecisions` spec in
precision_specs.json kept at fp16 (`--precisionConstraints=obey`), the spec `tensorforge debug precision` found for
a model whose plain INT8/FP8 engine misses cosine 0.99 (bench/find_precision_spec.py writes it, with the command
and the cosine it was found at); a model with no recorded spec gets a "not run" row saying so.
"""

import hashlib
import json
import time
from pathlib import Path

import numpy as np

import tensorforge as tfg
from tensorforge.runtime import ExecutionContext

import zoo
from accuracy import quantized
from measure import timer
from zoo_case import build_summary, engine_runner, graph_columns, ort_reference

CALIB_INPUTS, CALIB_BATCH, CALIB_SEED = 32, 8, 1000
TEST_INPUTS, TEST_SEED = 64, 2000
TENSORRT_RESNET50_INT8_IMG_S = 94600        # MLPerf Inference offline, per H200 (published)
PRECISIONS = ["fp16", "int8", "fp8", "best", "int8-spec", "fp8-spec"]
SPECS_FILE = Path(__file__).with_name("precision_specs.json")


def recorded_spec(name: str, precision: str) -> dict | None:
    """{"spec": "node:fp16,...", ...} recorded for the model's `int8-spec`/`fp8-spec` row, or None."""
    if not SPECS_FILE.exists():
        return None
    return json.loads(SPECS_FILE.read_text()).get(name, {}).get(precision.removesuffix("-spec"))


def calibration_inputs(name: str) -> np.ndarray:
    return np.concatenate([zoo.example(name, CALIB_BATCH, seed=CALIB_SEED + k).numpy()
                           for k in range(CALIB_INPUTS // CALIB_BATCH)])


def calibration_feeds(name: str, batch: int) -> list[dict]:
    """The CALIB_INPUTS calibration inputs as feeds of the engine's batch (calibration runs the network at the
    shapes it is built for): batch ≤ CALIB_INPUTS → ⌈CALIB_INPUTS / batch⌉ feeds; a larger batch → one feed that
    repeats the inputs (the same distribution, each sample counted batch / CALIB_INPUTS times)."""
    xs = calibration_inputs(name)
    n = len(xs)
    feeds = max(1, -(-n // batch))
    pool = np.concatenate([xs] * -(-(feeds * batch) // n))
    return [{"input": np.ascontiguousarray(pool[k * batch:(k + 1) * batch])} for k in range(feeds)]


def test_inputs(name: str) -> np.ndarray:
    return zoo.example(name, TEST_INPUTS, seed=TEST_SEED).numpy()


def build_flags(precision: str, name: str, batch: int = 1) -> dict:
    if precision == "fp16":
        return {"fp16": True}
    if precision in ("int8", "fp8"):
        return {"fp16": True, precision: True, "calibration_data": calibration_feeds(name, batch)}
    if precision == "best":
        return {"best": True, "calibration_data": calibration_feeds(name, batch)}
    if precision in ("int8-spec", "fp8-spec"):
        return build_flags(precision.removesuffix("-spec"), name, batch)
    raise ValueError(f"unknown precision {precision!r} (one of {', '.join(PRECISIONS)})")


def unsupported(precision: str) -> str | None:
    """Why `tfg.build` cannot make this precision (None when it takes the option): its keyword arguments are
    checked first, since `build` passes unknown keywords on to the exporter instead of refusing them."""
    import inspect
    params = inspect.signature(tfg.build).parameters
    missing = [k for k in build_flags(precision, "resnet50") if k not in params]
    return f"tfg.build() takes no {missing[0]!r} argument" if missing else None


def applied(engine, precision: str) -> str | None:
    """None when the built engine records the precision flag asked for, else what it records instead."""
    flags = engine.data.build_info.get("flags", [])
    want = precision.removesuffix("-spec")
    return None if want in flags else f"the engine's flags are {flags}: {want!r} was not applied"


def build_engine(onnx_bytes: bytes, name: str, batch: int, precision: str, device: str, cache_path: str | None):
    """tfg.build with the row's flags; a spec row builds through a BuilderConfig with the recorded
    --layerPrecisions spec (kept layers at fp16, constraints obeyed: a layer that cannot be kept fails the build)."""
    shapes = {"input": zoo.input_shape(name, batch)}
    flags = build_flags(precision, name, batch)
    if not precision.endswith("-spec"):
        return tfg.build(onnx_bytes, shapes=shapes, device=device, timing_cache=cache_path, **flags)
    from tensorforge.builder import BuilderConfig, OptimizationProfile
    from tensorforge.builder.calibration import configure
    from tensorforge.builder.precision_spec import parse_precisions
    rec = recorded_spec(name, precision)
    if rec is None:
        raise LookupError(f"no debug-precision spec recorded for {name} {precision} in {SPECS_FILE.name} "
                          "(run bench/find_precision_spec.py)")
    profile = OptimizationProfile()
    profile.set_shape("input", shapes["input"], shapes["input"], shapes["input"])
    cfg = BuilderConfig(fp16=True, profiles=[profile], timing_cache_path=cache_path, device=str(device),
                        layer_precisions=parse_precisions(rec["spec"]), precision_constraints="obey")
    configure(cfg, flags.get("int8", False), flags.get("fp8", False), False, flags["calibration_data"])
    return tfg.build(onnx_bytes, config=cfg, device=device)


def run_engine_on(ctx, xs: np.ndarray, batch: int, device: str) -> np.ndarray:
    """The engine's outputs for every sample of `xs`, run `batch` at a time."""
    import torch
    n, outs = len(xs), []
    reps = -(-batch // n) if batch > n else 1
    pool = np.concatenate([xs] * reps) if reps > 1 else xs
    for start in range(0, n, batch):
        chunk = pool[start:start + batch]
        if len(chunk) < batch:                              # last short chunk: padded with the set's first samples
            chunk = np.concatenate([chunk, pool[:batch - len(chunk)]])
        y = ctx.run({"input": torch.from_numpy(np.ascontiguousarray(chunk)).to(device)})["output"]
        outs.append(y.float().cpu().numpy())
    return np.concatenate(outs)[:n]


def _error_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:240]}"


def ort_int8_accuracy(name: str, onnx_bytes: bytes, xs: np.ndarray, want: np.ndarray, classifier: bool,
                      threads: int, log) -> dict:
    """onnxruntime's INT8 of the model (ort_int8.py) on the test inputs, calibrated on our calibration inputs,
    scored like our rows; {"note": why} when onnxruntime cannot quantize or run it."""
    from ort_int8 import ort_int8_outputs
    t0 = time.perf_counter()
    try:
        acc = quantized(ort_int8_outputs(onnx_bytes, calibration_inputs(name), xs, threads), want, classifier)
    except Exception as e:  # noqa: BLE001 - the column says why; our rows do not depend on it
        acc = {"note": f"onnxruntime could not quantize or run it: {_error_line(e)}"}
    log(f"{name}: onnxruntime INT8 (same scheme) {acc.get('cosine', acc.get('note'))} in "
        f"{time.perf_counter() - t0:.1f} s")
    return acc


_ORT_SCORES: dict = {}       # (model, ONNX digest, threads) → (fp32 outputs, onnxruntime INT8 score or None)


def _ort_scores(name: str, onnx_bytes: bytes, xs: np.ndarray, classifier: bool, ort_threads: int, with_int8: bool,
                log) -> tuple:
    """onnxruntime's fp32 outputs on the test inputs and, when INT8 rows run, its own INT8 score — computed once per
    model and ONNX file in a process (the test inputs do not depend on the batch; 5–45 s per model on the device's
    CPU, which every batch's rows used to pay again)."""
    key = (name, hashlib.sha256(onnx_bytes).hexdigest(), ort_threads)
    want, score = _ORT_SCORES.get(key, (None, None))
    if want is None:
        t0 = time.perf_counter()
        want = ort_reference(onnx_bytes, xs, ort_threads)
        log(f"{name}: onnxruntime fp32 on {len(xs)} test inputs in {time.perf_counter() - t0:.1f} s")
    if with_int8 and score is None:
        score = ort_int8_accuracy(name, onnx_bytes, xs, want, classifier, ort_threads, log)
    _ORT_SCORES[key] = (want, score)
    return want, score if with_int8 else None


def run_model(name: str, onnx_bytes: bytes, batches: list[int], precisions: list[str], iters: int, warmup: int,
              cache_path: str | None, log, device: str = "cuda", best_batches=(1,), ort_threads: int = 8,
              budget_left=lambda: True) -> list[dict]:
    classifier = zoo.ZOO[name].family == "vision" and zoo.ZOO[name].classifier
    xs = test_inputs(name)
    want, ort_int8 = _ort_scores(name, onnx_bytes, xs, classifier, ort_threads, "int8" in precisions, log)
    time_fn = timer(device, iters, warmup)
    rows = []
    for batch in batches:
        fp16_ms = None
        for precision in ["fp16"] + [p for p in precisions if p != "fp16"]:
            if precision == "best" and batch not in best_batches:
                continue
            row = {"model": name, "batch": batch, "precision": precision}
            if not budget_left():
                row["error"] = "not run: time budget spent"
                rows.append(row)
                continue
            t_case = time.perf_counter()
            why = unsupported(precision)
            if why:
                row["error"] = f"not run: {why}"
                log(f"{name} b{batch} {precision}: {row['error']}")
                rows.append(row)
                continue
            try:
                engine = build_engine(onnx_bytes, name, batch, precision, device, cache_path)
            except Exception as e:  # noqa: BLE001 - the row says why, the run goes on
                row["error"] = f"not run: {_error_line(e)}"
                log(f"{name} b{batch} {precision}: {row['error']}")
                rows.append(row)
                continue
            why = applied(engine, precision)
            if why:
                row["error"] = f"not run: {why}"
                log(f"{name} b{batch} {precision}: {row['error']}")
                rows.append(row)
                continue
            if precision == "int8" and ort_int8 is not None:
                row["ort_int8_accuracy"] = ort_int8
            if precision.endswith("-spec"):
                row["layer_precisions"] = recorded_spec(name, precision)["spec"]
            try:
                row["build"] = build_summary(engine)
                ctx = ExecutionContext(engine.data, device)
                row["accuracy_vs_ort_fp32"] = quantized(run_engine_on(ctx, xs, batch, device), want, classifier)
                x = zoo.example(name, batch).to(device)
                row["runner"] = time_fn(engine_runner(ctx, x, device))
                row.update(graph_columns(ctx))
                if device == "cuda":         # where each engine's time goes, fp16 beside INT8/FP8 (report.py)
                    from kernel_profile import kernel_table
                    row["kernel_profile"] = kernel_table(engine_runner(ctx, x, device), 10)
            except Exception as e:  # noqa: BLE001
                row["error"] = f"failed: {_error_line(e)}"
                log(f"{name} b{batch} {precision}: {row['error']}")
                rows.append(row)
                continue
            ms = row["runner"]["median_ms"]
            row["median_ms"] = ms
            row["throughput_per_s"] = round(batch / ms * 1e3, 1)
            if precision == "fp16":
                fp16_ms = ms
            row["speedup_vs_fp16"] = round(fp16_ms / ms, 3) if fp16_ms else None
            if name == "resnet50":
                row["tensorrt_published_img_s"] = TENSORRT_RESNET50_INT8_IMG_S
                row["fraction_of_tensorrt"] = round(row["throughput_per_s"] / TENSORRT_RESNET50_INT8_IMG_S, 3)
            row["elapsed_s"] = round(time.perf_counter() - t_case, 1)
            log(f"{name} b{batch} {precision}: {ms:.4f} ms, {row['throughput_per_s']:.0f}/s, ×{row['speedup_vs_fp16']} "
                f"vs fp16, cos {row['accuracy_vs_ort_fp32'].get('cosine', float('nan')):.4f}; {row['elapsed_s']} s")
            rows.append(row)
            del engine, ctx
    return rows
