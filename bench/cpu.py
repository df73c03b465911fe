"""The CPU table of BENCH.md:  PYTHONPATH=. python bench/cpu.py [--only a,b] [--toy]  — tensorforge against
onnxruntime's CPU provider, both on 2 threads, on models built here with random weights (nothing downloaded):
realistic sizes (bench/cpu_models.py: ResNet-50 and MobileNetV3-Large at batch 1 and 8, BERT-base at sequence 128,
a GRU/LSTM sequence model, a Loop/If model, a YOLO-style detector at 640×640) and, with --toy, the small ones.

Timing: the two engines are timed APART, in alternating blocks in one process (onnxruntime's spinning pool would
otherwise steal a core from the other), median over all blocks, p10–p90 spread. Per model also: max abs difference
from onnxruntime (and pass at rtol 1e-3, atol 1e-4), the runtime overhead (per call, wall time of `execute` minus
the sum of its kernels' times, per layer and as % of the call) and, for every model slower than onnxruntime
(ratio > 1), the per-layer profile, onnxruntime's own per-node profile by op family beside ours, and the "what would
close it" line (bench/cpu_profile.py). Engines are built with CPU tactic timing (a timing cache in a temporary
file: each layer with two or more candidates — oneDNN against torch — is timed at its shapes, as on the GPU);
--untimed builds take the candidates' priority order instead.
Writes bench/results/cpu-<machine>.json (rows[].model, rows[].ratio, environment.threads: read by
tools/gen_readme_status.py) and .md.
"""

import argparse
import io
import json
import os
import platform
import sys
import tempfile
import time

# torch's libgomp pool spin-waits a while between parallel regions (libgomp's default), as onnxruntime's pool
# spins by default: a user of either gets that, and on a quiet machine it is the fair comparison. PASSIVE (threads
# sleep at once) survives a loaded machine better (MobileNetV3 b1 under load: 35–950 ms a call spinning, 22 ms
# passive) but costs a wake-up per parallel region when the cores are free (the same model on a quiet machine:
# 8.5 ms default, 18.0 ms PASSIVE, against onnxruntime's 3.2 ms): --omp-wait-policy=passive chooses it. libgomp
# reads the variable once when it loads, so it is settled here, before torch is imported; the table records it.
_POLICY = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--omp-wait-policy=")),
               os.environ.get("OMP_WAIT_POLICY", "default")).upper()
if _POLICY == "DEFAULT":
    os.environ.pop("OMP_WAIT_POLICY", None)
else:
    os.environ["OMP_WAIT_POLICY"] = _POLICY
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

from cpu_profile import closing_line, ort_by_op  # noqa: E402
from measure import stats  # noqa: E402

THREADS = 2


def _export(module, x, opset, names=("input", "output")) -> bytes:
    buf = io.BytesIO()
    torch.onnx.export(module.eval(), (x,), buf, dynamo=False, opset_version=opset, input_names=[names[0]],
                      output_names=[names[1]])
    return buf.getvalue()


def models():
    """name → (onnx bytes, numpy input)."""
    from gelu_case import SeedNet
    torch.manual_seed(0)
    out = {}
    x = torch.randn(1 << 20)
    out["gelu_seed_1M"] = (_export(SeedNet(), x, 11), x.numpy())
    mlp = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256))
    x = torch.randn(32, 256)
    out["mlp_b32"] = (_export(mlp, x, 17), x.numpy())
    cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
                              torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
                              torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10))
    x = torch.randn(1, 3, 64, 64)
    out["small_cnn_64px"] = (_export(cnn, x, 17), x.numpy())
    try:
        import transformers

        import zoo
        bert = transformers.BertModel(transformers.BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                                                              intermediate_size=512), add_pooling_layer=False)
        ids = torch.randint(0, 30522, (1, 64))
        out["tiny_bert_seq64"] = (_export(zoo.LastHidden(bert.eval()), ids, 17), ids.numpy())
    except ImportError:
        pass
    return out


def _commit_label() -> str:
    """'commit <short hash>' of this checkout, with '+changes' when tracked files differ; '' outside git."""
    import subprocess
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=HERE,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return f"commit {head}{'+changes' if dirty else ''}" if head else ""


def _timed_apart(fns: dict, blocks: int, per_block: int) -> dict[str, list[float]]:
    """name → wall times (ms): `blocks` rounds, each running every fn `per_block` times in turn."""
    out = {k: [] for k in fns}
    for _ in range(blocks):
        for k, fn in fns.items():
            time.sleep(0.25)             # the other engine's spinning threads go idle first
            fn()                         # one untimed call: caches warm after the other engine ran
            for _ in range(per_block):
                t0 = time.perf_counter()
                fn()
                out[k].append((time.perf_counter() - t0) * 1e3)
    return out


def _overhead(ctx, feed, iterations: int) -> tuple[dict, list]:
    """Runtime overhead: per uncaptured `execute`, wall time minus Σ kernel times (hook around each kernel);
    medians over `iterations`. Returns (summary, per-layer median ms)."""
    n = len(ctx.engine.layers)
    dev_feed = {k: v.to(ctx.device) for k, v in feed.items()}
    ctx.execute(dev_feed)
    per_layer: list[list[float]] = [[] for _ in range(n)]
    outside, total = [], []
    for _ in range(iterations):
        clock = [[0.0, 0.0] for _ in range(n)]

        def hook(i, phase, clock=clock):
            clock[i][phase == "end"] = time.perf_counter()
        t0 = time.perf_counter()
        ctx.execute(dev_feed, hook=hook)
        wall = (time.perf_counter() - t0) * 1e3
        kern = [(e - s) * 1e3 for s, e in clock]
        for i, k in enumerate(kern):
            per_layer[i].append(k)
        outside.append(wall - sum(kern))
        total.append(wall)
    med_out, med_total = float(np.median(outside)), float(np.median(total))
    return ({"outside_ms": round(med_out, 4), "per_layer_us": round(1e3 * med_out / max(n, 1), 2),
             "pct": round(100 * med_out / med_total, 2) if med_total else 0.0, "layers": n,
             "iterations": iterations}, [float(np.median(t)) for t in per_layer])


def _torch_ops_engine(onnx_bytes: bytes, untimed: bool):
    """A context of the engine built with oneDNN's C library hidden (kernels/onednn_capi.py), i.e. on torch's ops;
    None when the library is not installed (then the main engine is that engine already)."""
    import tensorforge as tfg
    from tensorforge.kernels import onednn_capi
    from tensorforge.runtime import ExecutionContext
    if onednn_capi.library() is None:
        return None
    with onednn_capi.hidden("hidden for the A/B column (--ab-torch-ops)"), tempfile.TemporaryDirectory() as tmp:
        engine = tfg.build(onnx_bytes, device="cpu", timing_cache=None if untimed else os.path.join(tmp, "t.json"))
    return ExecutionContext(engine.data, "cpu")


def _first(outs):
    return outs[0] if isinstance(outs, (list, tuple)) else next(iter(outs.values()))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--blocks", type=int, default=4, help="alternating timing blocks per model")
    p.add_argument("--block-ms", type=float, default=600.0, help="target wall time of one block of one engine")
    p.add_argument("--only", default="", help="comma-separated model names")
    p.add_argument("--toy", action="store_true", help="also the small models of the earlier table")
    p.add_argument("--untimed", action="store_true", help="build without CPU tactic timing (priority order)")
    p.add_argument("--omp-wait-policy", default="default", choices=["default", "passive", "active"],
                   help="torch's libgomp wait policy (read before torch loads: write --omp-wait-policy=X); default: "
                   "libgomp's own, spinning a while, as onnxruntime's pool does")
    p.add_argument("--ab-torch-ops", action="store_true", help="also time, in the same blocks, an engine built with "
                   "oneDNN's C library hidden (torch's per-call oneDNN/ATen ops, the tactics before it): the same-run "
                   "measure of what the C-API primitives change")
    p.add_argument("--out-dir", default=os.path.join(HERE, "results"))
    p.add_argument("--label", default=None, help="what was measured (default: the checkout's commit, "
                   "'+changes' when the working tree differs from it); recorded as environment.label")
    args = p.parse_args(argv)
    import onnxruntime as ort

    import tensorforge as tfg
    from cpu_models import realistic_models
    from tensorforge.runtime import ExecutionContext
    torch.set_num_threads(THREADS)
    only = set(filter(None, args.only.split(","))) or None
    cases = {}
    if args.toy:
        cases.update({k: (b, {"input": x}) for k, (b, x) in models().items() if only is None or k in only})
    cases.update(realistic_models(only))
    load_before = os.getloadavg()
    rows, profiles = [], {}
    for name, (onnx_bytes, feeds) in cases.items():
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = THREADS, 1
        sess = ort.InferenceSession(onnx_bytes, opts, providers=["CPUExecutionProvider"])
        np_feed = {i.name: feeds[i.name] for i in sess.get_inputs()}
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            engine = tfg.build(onnx_bytes, device="cpu",
                               timing_cache=None if args.untimed else os.path.join(tmp, "timing.json"))
        build_s = time.perf_counter() - t0
        ctx = ExecutionContext(engine.data, "cpu")
        runners = {"onnxruntime": lambda: sess.run(None, np_feed), "tensorforge": lambda: ctx.run(feed)}
        ab = _torch_ops_engine(onnx_bytes, args.untimed) if args.ab_torch_ops else None
        feed = {k: torch.from_numpy(v) for k, v in np_feed.items()}
        want = sess.run(None, np_feed)[0]
        got = _first(ctx.run(feed)).numpy()
        diff = float(np.abs(got.astype(np.float64) - want).max())
        ok = bool(np.allclose(got, want, rtol=1e-3, atol=1e-4))
        t0 = time.perf_counter()
        ctx.run(feed)
        sess.run(None, np_feed)
        one = (time.perf_counter() - t0) * 500           # ms per call, the two engines' mean
        per_block = int(min(30, max(3, args.block_ms / max(one, 1e-3))))
        if ab is not None:
            ab_got = _first(ab.run(feed)).numpy()
            runners["torch_ops"] = lambda: ab.run(feed)
        times = _timed_apart(runners, args.blocks, per_block)
        ort_st, tf_st = stats(times["onnxruntime"]), stats(times["tensorforge"])
        over, per_layer = _overhead(ctx, feed, max(3, per_block))
        row = {"model": name, "onnxruntime": ort_st, "tensorforge": tf_st,
               "ratio": round(tf_st["median_ms"] / ort_st["median_ms"], 3), "max_abs_diff": diff, "matches": ok,
               "device_layers": sum(layer.placement != "host" for layer in engine.data.layers),
               "layer_ops": sorted({layer.op for layer in engine.data.layers if layer.placement != "host"}),
               "runtime_overhead": over, "build_s": round(build_s, 2),
               "tactics": {k: v for k, v in (engine.data.build_info.get("tactics") or {}).items()
                           if k in ("timed_layers", "measurements", "untimed_layers")},
               "passes": {k: v for k, v in (engine.data.build_info.get("passes") or {}).items() if v}}
        if ab is not None:
            ab_st = stats(times["torch_ops"])
            row["tensorforge_torch_ops"] = {**ab_st, "ratio": round(ab_st["median_ms"] / ort_st["median_ms"], 3),
                                            "matches": bool(np.allclose(ab_got, want, rtol=1e-3, atol=1e-4)),
                                            "c_api_speedup": round(ab_st["median_ms"] / tf_st["median_ms"], 3)}
        rows.append(row)
        total = sum(per_layer) or 1.0
        order = sorted(range(len(per_layer)), key=lambda i: -per_layer[i])
        profiles[name] = [{"layer": engine.data.layers[i].name, "op": engine.data.layers[i].op,
                           "tactic": engine.data.layers[i].tactic, "median_ms": round(per_layer[i], 4),
                           "pct": round(100 * per_layer[i] / total, 1)} for i in order[:12]]
        by_op: dict[str, float] = {}
        for i, t in enumerate(per_layer):
            by_op[engine.data.layers[i].op] = by_op.get(engine.data.layers[i].op, 0.0) + t
        row["time_by_op_pct"] = {k: round(100 * v / total, 1) for k, v in sorted(by_op.items(), key=lambda kv: -kv[1])}
        if row["ratio"] > 1.0:            # a miss: onnxruntime's own profile beside ours, and what would close it
            ours_ms = {k: round(v, 4) for k, v in sorted(by_op.items(), key=lambda kv: -kv[1])}
            row["kernel_ms_by_op"] = ours_ms
            row["onnxruntime_ms_by_op"] = {k: round(v, 4) for k, v in ort_by_op(onnx_bytes, np_feed, THREADS).items()}
            row["closing"] = closing_line(name, ours_ms, row["onnxruntime_ms_by_op"], ort_st["median_ms"],
                                          len(per_layer), sum(per_layer), over["pct"])
        print(f"{name:<18} ort {ort_st['median_ms']:9.3f} ms  tensorforge {tf_st['median_ms']:9.3f} ms  ratio "
              f"{row['ratio']:.2f}  max|diff| {diff:.1e}{'' if ok else ' MISMATCH'}  overhead "
              f"{over['per_layer_us']:.1f} µs/layer ({over['pct']:.1f} %)", flush=True)
        del ctx, engine, sess, ab
    ranked = [r["model"] for r in sorted(rows, key=lambda r: -r["ratio"])]
    slowest = ranked[0] if ranked else None
    by_name = {r["model"]: r for r in rows}
    misses = [m for m in ranked if by_name[m]["ratio"] > 1.0]
    res = {"environment": {"machine": platform.machine(), "processor": platform.processor(), "threads": THREADS,
                           "torch": torch.__version__, "onnxruntime": ort.__version__, "tensorforge": tfg.__version__,
                           "blocks": args.blocks, "block_ms": args.block_ms, "timing": "alternating blocks, one process",
                           "loadavg_before": [round(x, 2) for x in load_before],
                           "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "libgomp default"),
                           "loadavg_after": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(),
                           "label": args.label if args.label is not None else _commit_label()},
           "rows": rows, "slowest": slowest, "slowest_profile": profiles.get(slowest, []),
           "profiles": {m: profiles[m] for m in misses}}
    os.makedirs(args.out_dir, exist_ok=True)
    stem = f"cpu-{platform.machine()}"
    with open(os.path.join(args.out_dir, f"{stem}.json"), "w") as f:
        json.dump(res, f, indent=1)
    env = res["environment"]
    md = [f"# CPU: tensorforge vs onnxruntime ({THREADS} threads each, {platform.machine()}, {env['cpus']} cores)"
          + (f", {env['label']}" if env.get("label") else ""), "",
          f"`PYTHONPATH=. python bench/cpu.py{''.join(' ' + a for a in (sys.argv[1:] if argv is None else argv))}`: "
          f"each engine timed apart in {args.blocks} alternating blocks (one process),"
          f" median of all runs, ± the p10–p90 spread. Load average before/after: {env['loadavg_before'][0]} / "
          f"{env['loadavg_after'][0]} (shared machine: absolute times are noisy, the ratio is the figure). "
          f"OMP_WAIT_POLICY={env['omp_wait_policy']} for torch's pool (--omp-wait-policy; onnxruntime's pool spins "
          "by default).",
          "Runtime overhead: wall time of an uncaptured `execute` minus the sum of its kernels' times, per layer and as "
          "a share of the call. Matches: rtol 1e-3, atol 1e-4 against onnxruntime. Tactics: "
          + ("priority order (--untimed)." if args.untimed else "timed per layer on the CPU (a timing cache per build; "
             "layers with one candidate untimed)."), "",
          "| model | onnxruntime ms | tensorforge ms | tf / ort | max abs diff | matches | overhead µs/layer (% of call) "
          "| engine layers | top ops by time |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        o = r["runtime_overhead"]
        top = ", ".join(f"{k} {v:.0f}%" for k, v in list(r["time_by_op_pct"].items())[:3])
        md.append(f"| {r['model']} | {r['onnxruntime']['median_ms']:.3f} ±{r['onnxruntime']['spread_pct']:.0f}% | "
                  f"{r['tensorforge']['median_ms']:.3f} ±{r['tensorforge']['spread_pct']:.0f}% | {r['ratio']:.2f} | "
                  f"{r['max_abs_diff']:.1e} | {'yes' if r['matches'] else 'NO'} | {o['per_layer_us']:.1f} ({o['pct']:.1f}%) | "
                  f"{r['device_layers']} | {top} |")
    ab_rows = [r for r in rows if "tensorforge_torch_ops" in r]
    if ab_rows:
        md += ["", "### Same run: the engine on torch's ops (oneDNN's C library hidden at build, --ab-torch-ops)", "",
               "Timed in the same alternating blocks as the two columns above: what the oneDNN C-API primitives "
               "(kernels/cpu_dnnl_*.py) change, measured in one run.", "",
               "| model | tensorforge, torch's ops ms | its tf / ort | matches | C-API engine ms | torch ops ÷ C-API |",
               "| --- | --- | --- | --- | --- | --- |"]
        for r in ab_rows:
            a = r["tensorforge_torch_ops"]
            md.append(f"| {r['model']} | {a['median_ms']:.3f} ±{a['spread_pct']:.0f}% | {a['ratio']:.2f} | "
                      f"{'yes' if a['matches'] else 'NO'} | {r['tensorforge']['median_ms']:.3f} | "
                      f"{a['c_api_speedup']:.2f} |")
    md += ["", f"## Per-layer profiles of the {len(misses)} models slower than onnxruntime (ratio > 1), slowest first",
           "", "Top 12 layers by median kernel time (hooked uncaptured calls); then onnxruntime's profiler by op family "
           "and what would close the gap."]
    for m in misses:
        md += ["", f"### {m}: {by_name[m]['ratio']:.2f}×", "",
               "| layer | op | tactic | median ms | % of kernel time |", "| --- | --- | --- | --- | --- |"]
        md += [f"| {x['layer']} | {x['op']} | {x['tactic']} | {x['median_ms']:.3f} | {x['pct']:.1f} |"
               for x in profiles[m]]
        md += [""] + [f"- {line}" for line in by_name[m].get("closing", [])]
    with open(os.path.join(args.out_dir, f"{stem}.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
