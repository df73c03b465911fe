"""trtexec's report: trace averages, `=== Performance summary ===`, a latency histogram, --exportTimes JSON.

Entry points: `option_lines`/`device_lines` (the log's header), `summarize(values, percentiles)`,
`summary_lines(result, percentiles)`, `average_lines(...)`, `histogram_lines(values)`, `times_records(result)`.
Statistics follow trtexec: over the n timed queries sorted ascending, median = the middle value (mean of the
two middle ones for even n) and percentile(p) = sorted[max(n - 1 - ⌊(100 - p)·n / 100⌋, 0)], so p = 100 is
the max and p = 0 the min. Throughput = n / Total Host Walltime; Total GPU Compute Time = Σ compute (named
CPU Compute Time when the engine runs on the CPU).
"""

import math
import platform
from dataclasses import dataclass
from fractions import Fraction

import torch

from ..version import __version__

from .inference_bench import BenchResult, Trace
from .shapes_arg import format_shape


@dataclass
class Stats:
    min: float
    max: float
    mean: float
    median: float
    percentiles: dict[float, float]


def percentile(sorted_values: list[float], p: float) -> float:
    """trtexec's nearest-rank percentile on an ascending list (exact arithmetic: no 0.1·10 = 0.999 surprises)."""
    n = len(sorted_values)
    exclude = math.floor((100 - Fraction(str(p))) * n / 100)
    return sorted_values[max(n - 1 - exclude, 0)]


def summarize(values: list[float], percentiles: list[float]) -> Stats:
    v = sorted(values)
    n = len(v)
    median = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    return Stats(v[0], v[-1], sum(v) / n, median, {p: percentile(v, p) for p in percentiles})


def _g(x: float) -> str:
    """Numbers as trtexec prints them (C++ stream default: 6 significant digits)."""
    return f"{x:.6g}"


def stats_text(s: Stats) -> str:
    text = f"min = {_g(s.min)} ms, max = {_g(s.max)} ms, mean = {_g(s.mean)} ms, median = {_g(s.median)} ms"
    return text + "".join(f", percentile({_g(p)}%) = {_g(v)} ms" for p, v in s.percentiles.items())


METRICS = [("Latency", lambda t: t.latency), ("Enqueue Time", lambda t: t.enqueue), ("H2D Latency", lambda t: t.h2d),
           ("GPU Compute Time", lambda t: t.compute), ("D2H Latency", lambda t: t.d2h)]


def compute_label(host_is_device: bool) -> str:
    """The device-time metric's name: trtexec's "GPU Compute Time", or "CPU Compute Time" when the engine runs
    on the CPU (the host is the device)."""
    return "CPU Compute Time" if host_is_device else "GPU Compute Time"


def summary_lines(result: BenchResult, percentiles: list[float], host_is_device: bool = False
                  ) -> tuple[list[str], list[str]]:
    """(info lines, warning lines) of the `=== Performance summary ===` block. On CPU (`host_is_device`)
    enqueue and compute are the same interval, so the enqueue-bound warning is meaningless and omitted, and the
    compute metric is named CPU Compute Time."""
    timed = result.timed
    wall = result.walltime_ms
    stats = {label: summarize([get(t) for t in timed], percentiles) for label, get in METRICS}
    total_compute = sum(t.compute for t in timed)
    qps = len(timed) / wall * 1e3 if wall > 0 else float("inf")
    shown = {"GPU Compute Time": compute_label(host_is_device)}
    info = ["=== Performance summary ===", f"Throughput: {_g(qps)} qps"]
    info += [f"{shown.get(label, label)}: {stats_text(stats[label])}" for label, _ in METRICS]
    info += [f"Total Host Walltime: {_g(wall / 1e3)} s",
             f"Total {compute_label(host_is_device)}: {_g(total_compute / 1e3)} s"]
    warn = []
    compute = stats["GPU Compute Time"]
    if not host_is_device and stats["Enqueue Time"].median > 0.8 * compute.median and compute.median > 0:
        warn.append("* Throughput may be bound by Enqueue Time rather than GPU Compute and the GPU may be under-utilized.")
    if stats["H2D Latency"].median >= compute.median > 0:
        warn.append("* Throughput may be bound by host-to-device transfers for the inputs; "
                    "add --noDataTransfers to measure without them.")
    if stats["D2H Latency"].median >= compute.median > 0:
        warn.append("* Throughput may be bound by device-to-host transfers for the outputs; "
                    "add --noDataTransfers to measure without them.")
    if compute.mean > 0:
        cv = math.sqrt(sum((t.compute - compute.mean) ** 2 for t in timed) / len(timed)) / compute.mean * 100
        if cv > 1.0:
            warn.append(f"* {'CPU' if host_is_device else 'GPU'} compute time is unstable, with coefficient of "
                        f"variance = {_g(cv)}%.")
    return info, warn


EXPLANATIONS = [
    "=== Explanations of the performance metrics ===",
    "Total Host Walltime: host time from the start of the first timed query to the end of the last one.",
    "GPU Compute Time (CPU Compute Time on the CPU): device time spent running the engine's layers for one "
    "query (host clock on CPU).",
    "Total GPU Compute Time: the sum of GPU Compute Time over all timed queries; much below Total Host Walltime "
    "means host overheads or transfers leave the device idle.",
    "Throughput: timed queries divided by Total Host Walltime.",
    "Enqueue Time: host time to launch one query (copies, layer launches); on CPU it is the compute itself.",
    "H2D Latency: time to copy one query's inputs from pinned host memory to the device.",
    "D2H Latency: time to copy one query's outputs from the device to pinned host memory.",
    "Latency: H2D Latency + GPU Compute Time + D2H Latency of one query.",
]


def average_lines(timed: list[Trace], avg_runs: int) -> list[str]:
    """`Average on N runs - GPU latency: … ms - Host latency: … ms (enqueue … ms)` per full group of N."""
    lines = ["=== Trace details ===", f"Trace averages of {avg_runs} runs:"]
    for i in range(0, len(timed) - avg_runs + 1, avg_runs):
        grp = timed[i:i + avg_runs]
        lines.append(f"Average on {avg_runs} runs - GPU latency: {_g(sum(t.compute for t in grp) / avg_runs)} ms - "
                     f"Host latency: {_g(sum(t.latency for t in grp) / avg_runs)} ms "
                     f"(enqueue {_g(sum(t.enqueue for t in grp) / avg_runs)} ms)")
    return lines


def histogram_lines(values: list[float], bins: int = 10, width: int = 40, label: str = "GPU Compute Time") -> list[str]:
    """A text histogram: `[lo, hi) ms  ████▌  count` for equal-width bins between the min and the 99th
    percentile, then one line counting the slower outliers (so one stall does not squash every bar)."""
    if not values:
        return []
    v = sorted(values)
    lo, hi = v[0], percentile(v, 99)
    if hi <= lo:
        hi = v[-1]
    if hi <= lo:
        return [f"{label} histogram: all {len(v)} queries took {_g(lo)} ms"]
    step = (hi - lo) / bins
    counts = [0] * bins
    above = 0
    for x in v:
        if x > hi:
            above += 1
        else:
            counts[min(int((x - lo) / step), bins - 1)] += 1
    top = max(counts)
    lines = [f"{label} histogram ({len(v)} queries):"]
    for i, c in enumerate(counts):
        eighths = round(c / top * width * 8)
        bar = "█" * (eighths // 8) + ("▏▎▍▌▋▊▉"[eighths % 8 - 1] if eighths % 8 else "")
        close = "]" if i == bins - 1 else ")"
        lines.append(f"  [{_g(lo + i * step):>9}, {_g(lo + (i + 1) * step):>9}{close} ms {bar:<{width}} {c}")
    if above:
        lines.append(f"  ({_g(hi):>9}, {_g(v[-1]):>9}] ms {'(slowest 1%)':<{width}} {above}")
    return lines


def times_records(result: BenchResult) -> list[dict]:
    """--exportTimes: trtexec's per-query records (timed queries only), ms since the runner's time base."""
    return [{"startEnqMs": t.enq_start, "endEnqMs": t.enq_end, "startH2dMs": t.h2d_start, "endH2dMs": t.h2d_end,
             "startComputeMs": t.compute_start, "endComputeMs": t.compute_end,
             "startD2hMs": t.d2h_start, "endD2hMs": t.d2h_end, "h2dMs": t.h2d, "computeMs": t.compute,
             "d2hMs": t.d2h, "latencyMs": t.latency, "endToEndMs": t.end_to_end} for t in result.timed]


def option_lines(opts, profiles) -> list[str]:
    """The `=== Model/Build/Inference/Reporting Options ===` blocks for the options in effect."""
    out: list[str] = []
    info = out.append
    onoff = {True: "Enabled", False: "Disabled"}
    info("=== Model Options ===")
    info(f"Format: {'ONNX' if opts.onnx else '*'}")
    info(f"Model: {opts.onnx or ''}")
    info("=== Build Options ===")
    info("Precision: FP32" + ("+FP16" if opts.fp16 or getattr(opts, "best", False) else "") + ("+BF16" if opts.bf16 else "")
         + ("+INT8" if getattr(opts, "int8", False) or getattr(opts, "best", False) else "")
         + ("+FP8" if getattr(opts, "fp8", False) else "") + (" (strongly typed)" if getattr(opts, "strongly_typed", False) else ""))
    info(f"TF32: {onoff[opts.tf32]}")
    info(f"Builder optimization level: {opts.optimization_level}")
    if not profiles:
        info("Input build shapes: model")
    for name, (mn, opt, mx) in (profiles[0].shapes.items() if profiles else ()):
        info(f"Input build shape (profile 0): {name}={format_shape(mn)}+{format_shape(opt)}+{format_shape(mx)}")
    info(f"Save engine: {opts.save_engine or ''}")
    info(f"Load engine: {opts.load_engine or ''}")
    info(f"Skip inference: {onoff[opts.skip_inference]}")
    info("=== Inference Options ===")
    if not opts.shapes:
        info("Input inference shapes: model")
    for name, shape in opts.shapes.items():
        info(f"Input inference shape: {name}={format_shape(shape)}")
    info(f"Iterations: {opts.iterations}")
    dur = "until interrupted" if opts.duration_s < 0 else f"{opts.duration_s:g}s"
    info(f"Duration: {dur} (+ {opts.warmup_ms:g}ms warm up)")
    info(f"Idle time: {opts.idle_ms:g}ms")
    info("Inference Streams: 1")
    info(f"Data transfers: {onoff[opts.data_transfers]}")
    info(f"Spin-wait: {onoff[opts.spin_wait]}")
    info("CUDA Graph: Disabled")
    info("Inputs: " + (", ".join(f"{k}<-{v}" for k, v in opts.load_inputs.items()) or "random"))
    info("=== Reporting Options ===")
    info(f"Verbose: {onoff[opts.verbose]}")
    info(f"Averages: {opts.avg_runs} inferences")
    info("Percentiles: " + ",".join(f"{p:g}" for p in opts.percentiles))
    info(f"Dump output: {onoff[opts.dump_output]}")
    info(f"Export timing to JSON file: {opts.export_times or ''}")
    info(f"Export output to JSON file: {opts.export_output or ''}")
    return out


def device_lines(device) -> list[str]:
    """`=== Device Information ===`: the GPU's name, compute capability, SMs and memory, or the CPU."""
    out: list[str] = []
    info = out.append
    info("=== Device Information ===")
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        info(f"Selected Device: {p.name} ({device})")
        info(f"Compute Capability: {p.major}.{p.minor}")
        info(f"SMs: {p.multi_processor_count}")
        info(f"Device Global Memory: {p.total_memory >> 20} MiB")
    else:
        info(f"Selected Device: CPU ({platform.machine()}, {torch.get_num_threads()} threads)")
    info(f"TensorForge version: {__version__} (torch {torch.__version__})")
    return out
