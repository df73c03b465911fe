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
    "small_cnn_64px": ("FusedConvPool", "two oneDNN convolutions of 3.5 and 9.4 MFLOP at 64² take ≈ 0.06–0.2 ms "
                       "each (25–60 GFLOP/s): at this size a call's fixed cost (primitive look-up and set-up, the "
                       "NCHW→NHWC copy of the network input) is most of it; onnxruntime's NCHWc kernels run both in "
                       "≈ 0.1 ms. Closing it needs primitives built once per shape at load and a blocked layout "
                       "carried from the input."),
    "mlp_b32": ("MatMulEpilogue", "two 32×256·256×1024 GEMMs (8.4 M multiply-adds each) through oneDNN's linear "
                "with the GELU / bias fused, ≈ 0.15–0.25 ms each against onnxruntime's MLAS; under load both swing by "
                "±50 %. Closing it needs a GEMM that reaches MLAS's throughput at M = 32 (oneDNN's prepacked brgemm "
                "kernel with the primitive created once at load, not per call)."),
    "tiny_bert_seq64": ("MatMulEpilogue", "35 layers of GEMMs with 1–4 M multiply-adds at M = 64 where each oneDNN "
                        "call's fixed set-up (≈ 15–35 µs, measured on 1×32·32×10) is a large share; attention and "
                        "LayerNorm add per-call torch overhead. Closing it needs primitives created once at load "
                        "and the attention block as one fused CPU kernel."),
    "mobilenet_v3_b1": ("FusedConv", "46 oneDNN convolution calls at ≈ 25–40 µs of fixed cost each (≈ 1.5 ms; a "
                        "trivial 8→8 1×1 convolution at 1² takes 35.5 µs a call against 2 µs of oneDNN execute). The "
                        "M = 1 FCs (16 squeeze-excite FCs, 960→1280, 1280→1000) now time kernels/cpu_gemv.py "
                        "(addmm + one in-place activation): 1.115 → 0.802 ms in the network, still ≈ 25–60 µs per SE "
                        "FC in the network against 5–20 µs hot alone; onnxruntime counts those FCs as Conv and runs all "
                        "62 Conv nodes in MLAS's NCHWc layout. Closing it needs prebuilt primitives (no per-call "
                        "set-up), a blocked layout kept between layers, and the SE block as one fused layer."),
    "mobilenet_v3_b8": ("FusedConv", "measured with ONEDNN_VERBOSE in the network (5 calls, medians): the 46 "
                        "convolution layers take 25.0 ms of kernel time while oneDNN's own execute of their primitives "
                        "sums to 16.6 ms — about onnxruntime's whole Conv family (≈ 17.8 ms). The 8.4 ms between is "
                        "outside the primitives' execution: torch's `_convolution_pointwise` set-up per call "
                        "(descriptor creation, cache look-up, output allocation; ≈ 0.1–0.2 ms a call at these sizes) "
                        "and the global pools of the FusedConvPool layers. Closing it needs oneDNN primitives created "
                        "once at load and executed directly, which torch does not expose (its prepacked "
                        "`mkldnn_prepacked::conv2d_run` measured the same per call: 169 against 169 µs, 64→64 1×1 at "
                        "56²)."),
    "detector_640": ("FusedConv", "measured in the network: the 32 convolution layers take 16.6 ms, oneDNN's execute "
                     "of them 12.5 ms (ONEDNN_VERBOSE; onnxruntime's Conv family ≈ 10.6 ms, its 6×6/2 3→16 stem "
                     "1.5 ms + 0.4 ms SiLU against our fused 2.4 ms): ≈ 3.8 ms is per-call set-up outside the "
                     "primitives (≈ 100 µs a call, median). /Concat_3 (2.1–2.2 ms against onnxruntime's 0.54) is "
                     "the three heads' 255-channel outputs (8.6 MB) arriving channels-last and concatenated over "
                     "positions, i.e. a transposing copy through torch's strided loop (2.27 ms with caches flushed, "
                     "≈ 8 GB/s; a layout-keeping copy 0.88 ms). Moving the transpose does not pay: a layout-keeping "
                     "Concat left it to the engine output's dense copy (network 22.04 against 21.42 ms); the heads "
                     "as GEMMs writing NCHW saved 0.75 ms (20.67 ms) but lose alone (heads.0 2.0 against 1.0 ms), "
                     "so per-layer timing cannot choose them. Closing it needs prebuilt primitives, a vectorised "
                     "NHWC→NCHW transpose (onnxruntime's ReorderOutput: 0.37 ms per head) and Concat → Sigmoid as "
                     "one pass."),
    "resnet50_b1": ("FusedConv", "measured in the network (ONEDNN_VERBOSE, 5 calls, medians): the 53 convolution "
                    "layers take 34.7 ms of kernel time, oneDNN's execute of their primitives 27.8 ms (less than "
                    "onnxruntime's ≈ 29.4 ms Conv family); the rest, ≈ 106–122 µs per call (p10–p90 94–155 µs), is "
                    "outside the primitives and present alone too (512→512 3×3 at 7²: 777 µs a call, 632 µs "
                    "execute; 64→64 1×1 at 56²: 166 against 75 µs): torch's per-call `_convolution_pointwise` "
                    "set-up. That ≈ 5.6–6.7 ms is the gap. Closing it needs oneDNN primitives created once at load "
                    "and executed directly (torch's prepacked conv2d_run measured no faster per call)."),
    "resnet50_b8": ("FusedConv", "measured in the network (ONEDNN_VERBOSE, 5 calls, medians): the 53 convolution "
                    "layers take 220.2 ms of kernel time, oneDNN's execute 208.3 ms (onnxruntime's Conv family "
                    "≈ 215 ms); ≈ 12.2 ms (212 µs a call, p10–p90 190–245 µs) is per-call set-up outside the "
                    "primitives. The rest of the gap is load: on a quiet machine the primitives match onnxruntime's. "
                    "Closing it needs oneDNN primitives created once at load and executed directly."),
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
