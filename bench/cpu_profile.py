"""Per-layer profiles for bench/cpu.py's misses: onnxruntime's own per-node times, ours beside them by op family,
and the "what would close it" line of each model whose ratio is above 1.

    ort_by_op(onnx bytes, feeds, threads, runs)  onnxruntime's profiler (a separate session, not the timed one):
                                                 median per top-level node over `runs`, summed per op type (ms)
    closing_line(model, ours_by_op, ort_by_op, ort_wall_ms, calls, kernel_ms, overhead)
                                                 the measured comparison, then NOTES[model] when the profile
                                                 still shows what the note explains (else the note is withheld)

NOTES are written from profiles measured on this machine (the numbers in them are those measurements); each
names the op whose time it explains and is printed only while that op is one of the model's two costliest.
"""

import json
import os
import tempfile

import numpy as np

# our op → onnxruntime's family (ours fuse what onnxruntime keeps as separate nodes, or the reverse)
FAMILY = {"FusedConv": "Conv", "FusedConvPool": "Conv", "Conv": "Conv", "MatMulEpilogue": "GEMM", "Gemm": "GEMM",
          "MatMul": "GEMM", "FusedMatMul": "GEMM", "GRU": "GRU", "LSTM": "LSTM", "Loop": "Loop",
          "Attention": "Attention", "LayerNormalization": "LayerNorm", "SkipLayerNormalization": "LayerNorm",
          "GlobalAveragePool": "Pool", "MaxPool": "Pool", "AveragePool": "Pool"}

NOTES = {
    "loop_if_32": ("Loop", "the body runs as a slot program with its input GEMM and bias lifted out of the trips "
                   "((x·Wx + b)[i], kernels/body_program.py), the hidden GEMM joined with the row in one addmm and "
                   "tanh applied in place: each trip is one torch addmm, one tanh_ and the program's and Loop's "
                   "Python (the trip index, the condition read), ≈ 10–20 µs a trip where onnxruntime's C++ Loop "
                   "takes ≈ 4–8 µs. Closing it needs the trip loop itself out of Python: the Loop recognised as an "
                   "RNN and run as one fused recurrent call, or the whole loop as one generated CPU kernel."),
    "gru_lstm_200": ("GRU", "each GRU/LSTM layer is one oneDNN RNN primitive call (kernels/cpu_dnnl_rnn.py: "
                     "lbr_gru / lstm through the C API, brgemm:avx512_core, W and R packed once per engine, one "
                     "intra-op thread): a 200-step 256→256 GRU layer 2.27 ms against 5.39 through torch's `_VF.gru` "
                     "and 2.5 through onnxruntime at 1 thread, the 256→128 LSTM 1.00 against 1.18 and 0.86; the "
                     "whole model's fastest runs 6.2 ms against 12.8 before, onnxruntime's 5.1–5.6 (load ≈ 3). "
                     "Left: each step's (1, 256)·(256, 768) GEMV reads the 768 KiB packed R from L2 (≈ 11 µs a "
                     "step, ≈ 70 GB/s), which onnxruntime splits over both cores when they are free; oneDNN's RNN "
                     "on 2 threads meets the second thread every step (1 → 2 threads: 2.25 → 2.0–2.3 ms on the "
                     "loaded machine, 2.2 → 9–11 ms with the other core busy). Closing it needs a two-core step "
                     "that does not stall on a busy core."),
    "small_cnn_64px": ("FusedConvPool", "per layer against onnxruntime's profiled nodes (2 threads, medians of 40 "
                       "calls, 2026-12-05): the two convolutions 0.071 / 0.051 ms (with the pool) and 0.048 / "
                       "0.030, the Gemm 0.017 / 0.006. Each is a oneDNN primitive made once (kernels/cpu_dnnl_*.py): "
                       "no per-call set-up is left, the rest is each call's Python dispatch (≈ 5–10 µs) and the "
                       "NCHW→NHWC copy of the network input; onnxruntime's whole run is ≈ 0.07–0.1 ms. Closing it "
                       "needs the few-layer path without Python per layer (one compiled program for the engine)."),
    "mlp_b32": ("MatMulEpilogue", "per layer against onnxruntime's profiled nodes (2 threads, medians of 40 calls, "
                "2026-12-05): 32×256·256×1024 + GELU 0.078 / 0.073 ms + its Gelu node 0.023, 32×1024·1024×256 0.081 "
                "/ 0.074 — the GEMMs (oneDNN matmul primitives made once, kernels/cpu_dnnl_matmul.py) are at "
                "onnxruntime's speed; the table's ratio is the two calls' Python dispatch and the machine's load "
                "(its ± spreads). Closing the rest needs the engine's calls without Python per layer."),
    "tiny_bert_seq64": ("MatMulEpilogue", "per layer (2 threads, medians of 40 calls, 2026-12-05): ours 0.80 ms in "
                        "kernels. The GEMMs run as oneDNN matmul primitives made once (0.033–0.055 ms each, 64 "
                        "rows), attention as torch's SDPA (0.070–0.080 ms per layer against ≈ 0.023 ms of "
                        "onnxruntime's attention MatMul + Softmax nodes), the embedding Gather 0.046 against 0.010. "
                        "At 35 layers of 25–80 µs, each layer's Python dispatch (≈ 5–10 µs) is a sizeable share. "
                        "Closing it needs a fused CPU attention kernel (one pass over Q·Kᵀ, softmax, ·V at these "
                        "sizes) and fewer, larger calls."),
    "mobilenet_v3_b1": ("FusedConv", "per layer against onnxruntime's profiled nodes (2 threads, medians of 40 calls, "
                        "2026-12-05): ours 4.42 ms in kernels, onnxruntime 3.27 ms profiled. Every convolution is "
                        "a oneDNN primitive made once (kernels/cpu_dnnl_conv.py; torch's per-call ops cost 25–40 µs "
                        "more each), so the gap is in the kernels: the 3→16 stem 0.172 / 0.086 ms (a 3-channel "
                        "NHWC source; oneDNN 3.2's NCHW-source path is its reference kernel), each squeeze-excite "
                        "depthwise conv + pool 0.07–0.10 / 0.03–0.05 (depthwise 5×5 672 at 14²: 51 µs alone, the "
                        "pool 9 µs), the 1280→1000 classifier 0.151 / 0.102 (an L3-streaming GEMV: every CPU GEMV "
                        "route here takes 165–190 µs with W out of L2, MLAS ≈ 100). Closing it needs faster "
                        "depthwise and small-channel kernels than oneDNN 3.2's (the newest oneDNN wheel is a TBB/SYCL "
                        "build that cannot share torch's OpenMP pool) and a streaming GEMV."),
    "mobilenet_v3_b8": ("FusedConv", "per layer against onnxruntime's profiled nodes (2 threads, medians of 40 calls, "
                        "2026-12-05): ours 29.9 ms in kernels, onnxruntime 23.9 ms. The largest gaps are the "
                        "memory-bound early layers at 112² and 56²: the 16→64 expansion 1.86 / 1.12 ms, the "
                        "residual projections 0.83 / 0.34 (the residual as a binary post-op reads it and writes a "
                        "new y; onnxruntime's Sum accumulates into the residual's buffer), an unfused residual Add "
                        "0.31 ms. Closing it needs in-place residual accumulation (oneDNN's sum post-op into the "
                        "residual's buffer when it dies at that layer: liveness and aliasing from the runtime) and "
                        "a blocked layout with fewer passes over the 112² maps."),
    "detector_640": ("Concat", "per layer against onnxruntime's profiled nodes (2 threads, medians of 40 calls, "
                     "2026-12-05): the convolutions (oneDNN primitives made once, SiLU as a post-op) are at "
                     "onnxruntime's speed — the stem 1.91 ms against its Conv 1.50 + QuickGelu 0.36 — and the gap "
                     "is /Concat_3, 1.21 / 0.40 ms: the three heads' 255-channel outputs arrive channels-last and "
                     "are concatenated over positions, a transposing copy (oneDNN's jit reorder does it only 14 % "
                     "faster than torch's copy: 0.68 against 0.79 ms for the 80² head; a NHWC→NCHW convolution "
                     "output is oneDNN 3.2's reference kernel, 445 ms), the Sigmoid after it 0.73 / 0.62 and an "
                     "unfused Add 0.15 / 0.06. Closing it needs the heads written NCHW by a convolution that "
                     "transposes in its store, or Concat → Sigmoid as one transposing pass."),
    "resnet50_b1": ("FusedConv", "per layer against onnxruntime's profiled nodes (2 threads, medians of 40 calls, "
                    "2026-12-05): ours 37.2 ms in kernels, onnxruntime 28.7 ms profiled, with no per-call set-up "
                    "left (oneDNN primitives made once, kernels/cpu_dnnl_conv.py). The gap is in the layers whose "
                    "weights stream in the network: a 3×3 512→512 at 7² 1.25–1.30 ms against 1.00 (0.68 alone, "
                    "weights cached), the 1×1 512→2048 + residual at 7² 0.67 against 0.44, the 7×7/2 stem 1.11 "
                    "against 0.74; the stem MaxPool was 0.56 against 0.09 and is now oneDNN's pooling primitive "
                    "(0.25 → 0.05 ms alone). Closing it needs kernels that stream W at batch 1 as MLAS's NCHWc "
                    "ones do (oneDNN 3.2's brgconv is near peak only with W in cache) and in-place residuals."),
    "resnet50_b8": ("FusedConv", "per layer against onnxruntime's profiled nodes (2 threads, medians of 40 calls, "
                    "2026-12-05): ours 242 ms in kernels, onnxruntime 216 ms. The gap is the block-ending 1×1 "
                    "convolutions with the residual at 56² and 28²: 4.2–4.9 ms against 2.6–3.0 each. Alone, "
                    "8×64→256 at 56² takes 2.87 ms with no residual and 3.74 with the residual as a binary post-op "
                    "(it reads the 25.7 MB residual and writes a new 25.7 MB y; onnxruntime's fused Sum "
                    "accumulates into the residual's buffer). Closing it needs in-place residual accumulation "
                    "(oneDNN's sum post-op into the residual when it dies at that layer)."),
}


def ort_by_op(onnx_bytes: bytes, feeds: dict, threads: int, runs: int = 10) -> dict[str, float]:
    """onnxruntime's per-node times (its profiler, nodes as its optimiser left them), median over `runs` per node,
    summed per op type (ms per call). Nodes inside a Loop/If/Scan body (events within one of theirs) are left out:
    the control-flow node's own time includes them."""
    import onnxruntime as ort
    with tempfile.TemporaryDirectory() as d:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
        opts.enable_profiling, opts.profile_file_prefix = True, os.path.join(d, "ort")
        sess = ort.InferenceSession(onnx_bytes, opts, providers=["CPUExecutionProvider"])
        for _ in range(runs + 1):
            sess.run(None, feeds)
        with open(sess.end_profiling()) as f:
            events = [e for e in json.load(f) if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time")]
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in events
             if (e.get("args") or {}).get("op_name") in ("Loop", "If", "Scan")]
    per_node: dict[tuple, list[float]] = {}
    for e in events:
        t0, t1 = e["ts"], e["ts"] + e["dur"]
        if any(a <= t0 and t1 <= b and (a, b) != (t0, t1) for a, b in spans):
            continue                                  # a body node: counted in its control-flow node's time
        key = (e["name"], (e.get("args") or {}).get("op_name", "?"))
        per_node.setdefault(key, []).append(e["dur"] / 1e3)
    by_op: dict[str, float] = {}
    for (_, op), times in per_node.items():
        by_op[op] = by_op.get(op, 0.0) + float(np.median(times[1:] or times))
    return dict(sorted(by_op.items(), key=lambda kv: -kv[1]))


def _families(by_op: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for op, ms in by_op.items():
        fam = FAMILY.get(op, "other")
        out[fam] = out.get(fam, 0.0) + ms
    return out


def closing_line(model: str, ours_ms: dict[str, float], ort_ms: dict[str, float], ort_wall_ms: float, calls: int,
                 kernel_ms: float, overhead_pct: float) -> list[str]:
    """Markdown lines: ours vs onnxruntime per op family, where the gap is, and the note when it still applies.
    onnxruntime's profile is taken as shares, scaled to its timed median `ort_wall_ms` (its profiler adds a cost
    per node — a Loop body's nodes are profiled every trip — and the machine's load differs between runs)."""
    total = sum(ort_ms.values()) or 1.0
    ours_f = _families(ours_ms)
    ort_f = {k: v / total * ort_wall_ms for k, v in _families(ort_ms).items()}
    fams = sorted(set(ours_f) | set(ort_f), key=lambda f: -(ours_f.get(f, 0.0) - ort_f.get(f, 0.0)))
    cells = [f"{f} {ours_f.get(f, 0.0):.3f} / {ort_f.get(f, 0.0):.3f}" for f in fams[:5]]
    gap = fams[0] if fams else None
    lines = [f"By op family, ms per call, ours / onnxruntime's (its profiler's shares of its median): {', '.join(cells)}. "
             f"Ours: {calls} kernel calls, {kernel_ms:.3f} ms in kernels, {kernel_ms / max(calls, 1) * 1e3:.0f} µs a "
             f"call on average; {overhead_pct:.1f} % of the call outside kernels."]
    if gap is not None:
        lines.append(f"Largest gap: {gap}, {ours_f.get(gap, 0.0) - ort_f.get(gap, 0.0):+.3f} ms.")
    note = NOTES.get(model)
    top2 = list(ours_ms)[:2]
    if note is None:
        lines.append("What would close it: (no note for this model; the comparison above is the measured part).")
    elif note[0] in top2:
        lines.append(f"What would close it: {note[1]}")
    else:
        lines.append(f"What would close it: the note written for this model explains {note[0]}, which is no longer "
                     f"among its two costliest ops ({', '.join(top2)}); withheld.")
    return lines
