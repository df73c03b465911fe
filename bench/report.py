"""Results → bench/results/<gpu>.json and a markdown report; plots only where matplotlib is installed.

Entry points: `write(results, out_dir, stem)` → list of files written; `markdown(results)` → text.
Plots (PNG): latency per zoo case for every runner, the tensorforge latency histogram per case, and the per-layer
profile by op type. Without matplotlib the same numbers appear as markdown tables. Sections: GELU, zoo (every
peer, the strongest named per row, accuracy with the clause that passed, the CUDA-graph column), build cost per
model, precision rows, dynamic-shape rows, "Not run".
"""

import json
import os

from accuracy import brief, summary
from peers import BACKEND, PEERS, ratios

RUNNERS = ["tensorforge", BACKEND] + PEERS


def _ms(st: dict | None) -> str:
    if not st:
        return "—"
    if "error" in st:
        return "error"
    return f"{st['median_ms']:.3f} ±{st['spread_pct']:.0f}%"


def _peer_cell(row: dict, name: str) -> str:
    st = row.get("runners", {}).get(name)
    if st is None:
        return "not run" if name in row.get("peers_not_run", ()) else "—"
    return _ms(st)


def _graph_cell(row: dict) -> str:
    if row.get("graphs") is None:
        return "—"
    if row["graphs"]:
        return "yes"
    blockers = row.get("graph_blockers") or []
    return f"no ({len(blockers)}: {', '.join(blockers)})" if blockers else f"no ({row.get('graph_note') or '?'})"


def _zoo_table(rows: list[dict]) -> list[str]:
    fp32 = any(r.get("dtype") == "fp32" for r in rows)
    backend = any(BACKEND in r.get("runners", {}) for r in rows)
    runners = [n for n in RUNNERS if n != BACKEND or backend]
    head = (["model", "batch", "dtype"] + runners + ["strongest peer", "tf / strongest", "tf / (compile+graph)"]
            + (["tf-backend / strongest", "tf-backend graphs, breaks"] if backend else [])
            + ["CUDA graph", "accuracy vs ORT fp32"] + (["TF32 off vs ORT (allclose 1e-3, 1e-4)"] if fp32 else []))
    lines = ["## Model zoo (median ms)", "",
             "Ratios: tensorforge ÷ the strongest peer measured in the same run for that row (named), and ÷ "
             "torch.compile + CUDA graph (continuity with earlier runs). 'not run': the peer was not selected for "
             "that row (max-autotune runs on a named subset: `--max-autotune`; on the H200 its rows, with every other "
             "peer re-measured beside it, are in `nvidia-h200-max-autotune.md`). Accuracy at every batch; the clause "
             "of the fp16 rule that passed is in brackets. tf-backend (when run) is ours too: the PyTorch model through "
             "torch.compile(backend=\"tensorforge\"), never counted as a peer.", "",
             "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['model']} | {row['batch']} | {row['dtype']} | error: {row['error']} |"
                         + " |" * (len(head) - 4))
            continue
        r = ratios(row["runners"])
        if row.get("strongest_peer"):
            r = {k: row.get(k, v) for k, v in r.items()}
        cells = [_peer_cell(row, n) if n != "tensorforge" else _ms(row["runners"].get(n)) for n in runners]
        strongest = f"{r['strongest_peer']} {r['strongest_peer_ms']:.3f}" if r["strongest_peer"] else "—"
        extra = [summary(row.get("accuracy_tf32_off"))] if fp32 else []
        be = _backend_cells(row, r) if backend else ""
        lines.append(f"| {row['model']} | {row['batch']} | {row['dtype']} | " + " | ".join(cells) +
                     f" | {strongest} | {r['ratio_vs_strongest'] or '—'} | {r['ratio_vs_compile_graph'] or '—'} | {be}"
                     f"{_graph_cell(row)} | {summary(row.get('accuracy_vs_ort_fp32'))} | " + " | ".join(extra)
                     + (" |" if extra else ""))
    lines.append("")
    notes = [(r["model"], r["batch"], r["dtype"], k, v.get("error")) for r in rows if "runners" in r
             for k, v in r["runners"].items() if "error" in v]
    notes += [(r["model"], r["batch"], r["dtype"], "tensorforge graphs", r["graph_note"]) for r in rows
              if r.get("graph_note")]
    notes += [(r["model"], r["batch"], r["dtype"], f"{BACKEND} break", b) for r in rows
              for b in r.get("runners", {}).get(BACKEND, {}).get("graph_breaks", [])]
    notes += [(r["model"], r["batch"], r["dtype"], f"{BACKEND} accuracy", summary(acc)) for r in rows
              for acc in [r.get("runners", {}).get(BACKEND, {}).get("accuracy_vs_ort_fp32")]
              if acc and (acc.get("pass") is False or acc.get("allclose_1e-3_1e-4") is False)]
    if notes:
        lines += ["Notes:", ""] + [f"- {m} b{b} {d} {k}: {e}" for m, b, d, k, e in notes] + [""]
    profiled = [r for r in rows if r.get("profile_ops")]
    if profiled:
        lines += ["## Where tensorforge's time goes (per-layer profile, uncaptured, ms per op type)", ""]
        for r in profiled:
            top = ", ".join(f"{op} {ms:.3f}" for op, ms in list(r["profile_ops"].items())[:8])
            lines.append(f"- {r['model']} b{r['batch']} {r['dtype']}: {top}")
        lines.append("")
    return lines


def _backend_cells(row: dict, r: dict) -> str:
    st = row.get("runners", {}).get(BACKEND)
    if not st:
        return "not run | — | "
    if "error" in st:
        return "error | — | "
    return f"{r.get('backend_vs_strongest') or '—'} | {st.get('graphs', '?')}, {len(st.get('graph_breaks', []))} | "


TARGET_RATIO = 0.8      # issue 15: every fp16 case at ≤ 0.8 of the strongest peer, or its kernel profile


def _kernel_profiles(rows: list[dict]) -> list[str]:
    """For every row above TARGET_RATIO that has kernel profiles: ours beside the strongest peer's (when profiled),
    wall vs summed kernel time vs gaps, and the top kernels of each."""
    missed = [r for r in rows if r.get("kernel_profiles") and (r.get("ratio_vs_strongest") or 0) > TARGET_RATIO]
    if not missed:
        return []
    lines = [f"## Kernel profiles of the rows above {TARGET_RATIO} of the strongest peer", "",
             "torch.profiler over 10 replays of each CUDA graph, right after it was timed: µs per inference "
             "(wall from CUDA events; kernel = summed kernel time; gaps = wall − kernel).", ""]
    for r in missed:
        lines += [f"### {r['model']} b{r['batch']} {r['dtype']}: tf / strongest {r['ratio_vs_strongest']}", "",
                  "| runner | wall µs | kernel µs | gaps µs | kernels |", "| --- | --- | --- | --- | --- |"]
        shown = [n for n in ("tensorforge", r.get("strongest_peer")) if n in r["kernel_profiles"]]
        for n in shown:
            t = r["kernel_profiles"][n]
            if "error" in t:
                lines.append(f"| {n} | error: {t['error']} | | | |")
                continue
            lines.append(f"| {n} | {t['wall_us']} | {t['kernel_us']} | {t['gap_us']} | {t['kernels']:.0f} |")
        for n in shown:
            t = r["kernel_profiles"][n]
            if "top" in t:
                lines += ["", f"{n}: " + "; ".join(f"{k['us']:.1f} µs ×{k['per_inference']:.0f} `{k['kernel'][:60]}`"
                                                   for k in t["top"][:6])]
        lines.append("")
    return lines


def _build_table(res: dict) -> list[str]:
    entries = res.get("build_costs") or ([dict(res["build_cost"], model="resnet50")] if res.get("build_cost") else [])
    prewarmed = sorted({b["cold_source"] for b in entries if b.get("cold_source")})
    lines = ["## Build cost (fp16, batch 1; cold = new timing cache, warm = the cache the cold build left)", ""]
    if prewarmed:
        lines += ["Cold columns (ours, torch.compile's, the torch.compile backend's) were measured in the prewarm phase "
                  f"({'; '.join(prewarmed)}): kernel and timing caches cold, both sides under the same load. "
                  "'timing-only' is this run's build with a new timing cache and the prewarm's compiled kernels.", ""]
    lines += ["| model | source | cold s | timing-only s | warm s | warm speedup | torch.compile default s | "
              "cold ÷ compile | torch.compile freezing s | backend s | same tactics |", "|" + " --- |" * 11]
    for b in entries:
        if "error" in b:
            lines.append(f"| {b.get('model')} | {b.get('source', 'zoo')} | error: {b['error']} |" + " |" * 8)
            continue
        lines.append(f"| {b.get('model')} | {b.get('source', 'zoo')} | {b.get('cold_s')} | "
                     f"{b.get('timing_cold_s', '—')} | {b.get('warm_s')} | "
                     f"{b.get('speedup')} | {b.get('torch_compile_s', '—')} | {b.get('cold_vs_torch_compile', '—')} | "
                     f"{b.get('torch_compile_freezing_s', '—')} | {b.get('backend_compile_s', '—')} | "
                     f"{b.get('same_tactics')} |")
    return lines + [""]


def _best_note(best: dict | None) -> str:
    """--best rows: which engine the whole-network check kept, with both network times."""
    if not best or "kept" not in best:
        return ""
    times = f", {best['mixed_ms']:.4f} vs {best['fp16_ms']:.4f} ms in the build" if "mixed_ms" in best else ""
    return f" ({'INT8/FP16 mixed' if best['kept'] == 'mixed' else 'FP16'} engine kept{times})"


def _precision_table(rows: list[dict]) -> list[str]:
    lines = ["## Precision (tensorforge engines; INT8/FP8 rows also allow fp16; accuracy vs fp32 onnxruntime on the "
             "test set)", "", "The same ratios as bars: `<results stem>-precision.png` (hatched where accuracy fails).", "",
             "| model | batch | precision | median ms | per s | × our fp16 | accuracy (cosine ≥ 0.99) | "
             "onnxruntime INT8, same scheme and inputs (bench/ort_int8.py) | CUDA graph | TensorRT published |",
             "|" + " --- |" * 10]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['batch']} | {r['precision']} | {r['error']} |" + " |" * 6)
            continue
        trt = (f"{r['tensorrt_published_img_s']} img/s (ours {100 * r['fraction_of_tensorrt']:.0f}%)"
               if r.get("tensorrt_published_img_s") and r["batch"] >= 256 else "")
        kept = r.get("layer_precisions")
        label = r["precision"] + (f" ({len(kept.split(','))} layers at fp16: --layerPrecisions in the JSON)"
                                  if kept else "") + _best_note(r.get("build", {}).get("best"))
        lines.append(f"| {r['model']} | {r['batch']} | {label} | {_ms(r.get('runner'))} | "
                     f"{r.get('throughput_per_s')} | {r.get('speedup_vs_fp16') or '—'} | "
                     f"{summary(r.get('accuracy_vs_ort_fp32'))} | {brief(r.get('ort_int8_accuracy'))} | "
                     f"{_graph_cell(r)} | {trt} |")
    profiled = [r for r in rows if r.get("kernel_profile")]
    if profiled:
        lines += ["", "Kernel profiles of these engines (their CUDA graph replayed under torch.profiler; µs per "
                  "inference, launches per inference; the time each kernel name takes in all):", ""]
    for r in profiled:
        k = r["kernel_profile"]
        lines.append(f"- {r['model']} b{r['batch']} {r['precision']}: wall {k['wall_us']} µs, kernels "
                     f"{k['kernel_us']} µs ({k['kernels']:.0f} launches), gaps {k['gap_us']} µs; "
                     + "; ".join(f"{t['us']:.1f} µs ×{t['per_inference']:.0f} `{t['kernel'][:60]}`"
                                 for t in k["top"][:6]))
    return lines + [""]


def _dynamic_table(rows: list[dict]) -> list[str]:
    lines = ["## Dynamic shapes (one engine with a range profile vs an engine built for exactly that shape)", "",
             "| model | dtype | point | shape | profile | dynamic ms | static ms | dynamic ÷ static (≤ 1.05) | "
             "cosine dyn vs static | CUDA graph (dyn / static) |", "|" + " --- |" * 10]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r.get('dtype')} | {r.get('point')} | {r.get('shape', '')} | | "
                         f"error: {r['error']} |" + " |" * 4)
            continue
        ok = "" if r["within_target"] else " MISS"
        lines.append(f"| {r['model']} | {r['dtype']} | {r['point']} | {tuple(r['shape'])} | "
                     f"{' .. '.join(str(tuple(p)) for p in r['profile'])} | {_ms(r['dynamic'])} | {_ms(r['static'])} | "
                     f"{r['ratio_dynamic_vs_static']}{ok} | {r['cosine_dynamic_vs_static']:.6f} | "
                     f"{_graph_cell(r['dynamic_graphs'])} / {_graph_cell(r['static_graphs'])} |")
    return lines + [""]


def _provenance(res: dict) -> list[str]:
    """Which run (its --label) measured which rows, when the rows carry labels."""
    by_run: dict[str, list[str]] = {}
    for row in res.get("zoo", []):
        by_run.setdefault(row.get("run") or "unlabelled", []).append(f"{row.get('model')} b{row.get('batch')} "
                                                                     f"{row.get('dtype')}")
    for case in res.get("gelu", []):
        by_run.setdefault(case.get("run") or "unlabelled", []).append(f"GELU {case.get('dtype')}")
    if isinstance(res.get("build_cost"), dict) and not res.get("build_costs"):
        by_run.setdefault(res["build_cost"].get("run") or "unlabelled", []).append("build cost")
    for b in res.get("build_costs", []):
        by_run.setdefault(b.get("run") or "unlabelled", []).append(f"build {b.get('model')}")
    for r in res.get("precision", []):
        by_run.setdefault(r.get("run") or "unlabelled", []).append(f"{r.get('model')} b{r.get('batch')} "
                                                                   f"{r.get('precision')}")
    for r in res.get("dynamic", []):
        by_run.setdefault(r.get("run") or "unlabelled", []).append(f"dynamic {r.get('model')} {r.get('point')}")
    if set(by_run) == {"unlabelled"}:
        return []
    return [f"- {label}: {', '.join(items)}" for label, items in by_run.items()] + [""]


def markdown(res: dict) -> str:
    env = res.get("environment", {})
    lines = [f"# tensorforge benchmark — {env.get('gpu', '?')}", "",
             f"torch {env.get('torch')}, triton {env.get('triton')}, tensorforge {env.get('tensorforge')}; "
             f"median of {env.get('iters')} iterations after {env.get('warmup')} warm-up, CUDA events; "
             "± is the p10–p90 spread relative to the median. fp32 runs allow TF32.", ""]
    if env.get("prewarm"):
        pw = env["prewarm"]
        lines += [f"Prewarmed (bench/prewarm.py: {pw.get('jobs')} jobs, {pw.get('workers')} at a time, "
                  f"{pw.get('wall_s')} s; not done: {', '.join(pw.get('jobs_not_ok') or {}) or 'none'}): every compile "
                  "of this run read warm on-disk caches, so the compile_s of its rows is warm; inductor's autotune "
                  "cache was off and our timing caches new, so every kernel and config choice was made in this run.",
                  ""]
    if env.get("label") and not env.get("earlier_runs"):
        lines += [f"Measured in one run: {env['label']}.", ""]
    if env.get("earlier_runs"):
        lines += [f"Rows merged from {len(env['earlier_runs']) + 1} runs (--append); each row's peers ran in the same "
                  "run as its tensorforge engine." + (f" {env['note']}" if env.get("note") else ""), ""]
        lines += _provenance(res)
    if res.get("gelu"):
        lines += ["## Seed GELU case (gelu(gelu(x)), opset-11 decomposition)", "",
                  "| dtype | runner | median ms | TB/s | % of copy |", "| --- | --- | --- | --- | --- |"]
        for case in res["gelu"]:
            if "error" in case:
                lines.append(f"| {case.get('dtype')} | error: {case['error']} | | | |")
                continue
            for name, st in case["runners"].items():
                lines.append(f"| {case['dtype']} | {name} | {_ms(st)} | {st.get('TB_per_s', '—')} | "
                             f"{st.get('pct_of_copy', '—')} |")
            lines.append(f"| {case['dtype']} | engine layers on device: {', '.join(case['engine_device_layers'])} | "
                         f"accuracy {json.dumps(case['accuracy'])} | | |")
        lines.append("")
    if res.get("zoo"):
        lines += _zoo_table(res["zoo"])
    if res.get("build_costs") or res.get("build_cost"):
        lines += _build_table(res)
    if res.get("precision"):
        lines += _precision_table(res["precision"])
    if res.get("dynamic"):
        lines += _dynamic_table(res["dynamic"])
    lines += _kernel_profiles(res.get("zoo", []))
    if res.get("skipped"):
        lines += ["## Not run", ""] + [f"- {s}" for s in res["skipped"]] + [""]
    return "\n".join(lines)


def _plots(res: dict, out_dir: str, stem: str) -> list[str]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    files = []
    rows = [r for r in res.get("zoo", []) if "runners" in r]
    if rows:
        fig, ax = plt.subplots(figsize=(max(8, len(rows) * 0.9), 5))
        width = 0.8 / len(RUNNERS)
        for k, runner in enumerate(RUNNERS):
            vals = [r["runners"].get(runner, {}).get("median_ms", 0) for r in rows]
            ax.bar([i + k * width for i in range(len(rows))], vals, width, label=runner)
        ax.set_xticks([i + 0.4 for i in range(len(rows))])
        ax.set_xticklabels([f"{r['model']}\nb{r['batch']} {r['dtype']}" for r in rows], rotation=60, fontsize=7)
        ax.set_ylabel("median latency (ms)")
        ax.set_yscale("log")
        ax.legend()
        fig.tight_layout()
        path = os.path.join(out_dir, f"{stem}-latency.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        files.append(path)
        fig, axes = plt.subplots(1, len(rows), figsize=(3 * len(rows), 3), squeeze=False)
        for ax, r in zip(axes[0], rows):
            ax.hist(r["runners"]["tensorforge"].get("raw_ms", []), bins=20)
            ax.set_title(f"{r['model']} b{r['batch']} {r['dtype']}", fontsize=7)
            ax.set_xlabel("ms")
        fig.tight_layout()
        path = os.path.join(out_dir, f"{stem}-histograms.png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        files.append(path)
    profiled = [r for r in rows if r.get("profile_ops")]
    if profiled:
        fig, axes = plt.subplots(1, len(profiled), figsize=(3.2 * len(profiled), 3), squeeze=False)
        for ax, r in zip(axes[0], profiled):
            ops = list(r["profile_ops"].items())[:8][::-1]
            ax.barh([o for o, _ in ops], [ms for _, ms in ops])
            ax.set_title(f"{r['model']} b{r['batch']} {r['dtype']}", fontsize=7)
            ax.set_xlabel("ms per run (uncaptured)")
            ax.tick_params(labelsize=6)
        fig.tight_layout()
        path = os.path.join(out_dir, f"{stem}-profile.png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        files.append(path)
    gpu = res.get("environment", {}).get("gpu", "")
    precision = _precision_plot(plt, res.get("precision", []), out_dir, stem,
                                f"INT8/FP8/best engines ÷ our fp16 engine, same run — {gpu}")
    return files + ([precision] if precision else [])


PRECISION_BARS = ("int8", "int8-spec", "fp8", "fp8-spec", "best")


def precision_bars(rows: list[dict]) -> tuple[list[str], dict[str, list]]:
    """The precision plot's data: one group per (model, batch) that has a row beyond fp16, in the table's order;
    per precision the throughput ÷ our fp16 engine (None where not measured) and whether its accuracy passed."""
    groups: list[str] = []
    bars: dict[str, list] = {p: [] for p in PRECISION_BARS}
    by = {(r["model"], str(r["batch"]), r["precision"]): r for r in rows if "error" not in r}
    for model, batch in dict.fromkeys((r["model"], str(r["batch"])) for r in rows):
        if not any((model, batch, p) in by for p in PRECISION_BARS):
            continue
        groups.append(f"{model}\nb{batch}")
        for p in PRECISION_BARS:
            r = by.get((model, batch, p))
            bars[p].append(None if r is None else (float(r["speedup_vs_fp16"]),
                                                   bool((r.get("accuracy_vs_ort_fp32") or {}).get("pass"))))
    return groups, bars


def _precision_plot(plt, rows: list[dict], out_dir: str, stem: str, title: str) -> str | None:
    """Throughput ÷ our fp16 engine per model, batch and precision (issue 12's table as bars): a line at 1.0 (the
    fp16 engine), hatched bars where the engine misses the accuracy rule."""
    groups, bars = precision_bars(rows)
    if not groups:
        return None
    from matplotlib.patches import Patch
    fig, ax = plt.subplots(figsize=(max(8, len(groups) * 0.9), 4.5))
    width = 0.8 / len(PRECISION_BARS)
    for k, p in enumerate(PRECISION_BARS):
        for i, v in enumerate(bars[p]):
            if v is not None:
                ax.bar(i + k * width, v[0], width, color=f"C{k}", hatch=None if v[1] else "//", edgecolor="black",
                       linewidth=0.3)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(groups))])
    ax.set_xticklabels(groups, rotation=60, fontsize=7)
    ax.set_ylabel("throughput ÷ our fp16 engine")
    ax.set_title(title, fontsize=9)
    handles = [Patch(facecolor=f"C{k}", edgecolor="black", label=p) for k, p in enumerate(PRECISION_BARS)]
    handles.append(Patch(facecolor="white", edgecolor="black", hatch="//", label="accuracy FAIL (cos < 0.99)"))
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    path = os.path.join(out_dir, f"{stem}-precision.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write(res: dict, out_dir: str, stem: str, plots: bool = True) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    jpath, mpath = os.path.join(out_dir, f"{stem}.json"), os.path.join(out_dir, f"{stem}.md")
    with open(jpath, "w") as f:
        json.dump(res, f, indent=1, sort_keys=False)
    with open(mpath, "w") as f:
        f.write(markdown(res))
    return [jpath, mpath] + (_plots(res, out_dir, stem) if plots else [])


def main(argv=None) -> int:
    """`python bench/report.py RESULTS.json ...`: rewrite each file's markdown and draw its plots beside it (the
    device runs write json + md only)."""
    import sys
    paths = sys.argv[1:] if argv is None else argv
    for path in paths:
        with open(path) as f:
            res = json.load(f)
        folder, stem = os.path.dirname(os.path.abspath(path)), os.path.basename(path)[:-len(".json")]
        print("\n".join(write(res, folder, stem, plots=True)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
