"""Results → bench/results/<gpu>.json and a markdown report; plots only where matplotlib is installed.

Entry points: `write(results, out_dir, stem)` → list of files written; `markdown(results)` → text.
Plots (PNG): latency per zoo case for every runner, the tensorforge latency histogram per case, and the per-layer
profile by op type. Without matplotlib the same numbers appear as markdown tables.
"""

import json
import os

RUNNERS = ["tensorforge", "eager", "eager+graph", "compile", "compile+graph"]


def _ms(st: dict | None) -> str:
    if not st:
        return "—"
    if "error" in st:
        return "error"
    return f"{st['median_ms']:.3f} ±{st['spread_pct']:.0f}%"


def _provenance(res: dict) -> list[str]:
    """Which run (its --label) measured which rows, when the rows carry labels."""
    by_run: dict[str, list[str]] = {}
    for row in res.get("zoo", []):
        by_run.setdefault(row.get("run") or "unlabelled", []).append(f"{row.get('model')} b{row.get('batch')} "
                                                                     f"{row.get('dtype')}")
    for case in res.get("gelu", []):
        by_run.setdefault(case.get("run") or "unlabelled", []).append(f"GELU {case.get('dtype')}")
    if isinstance(res.get("build_cost"), dict):
        by_run.setdefault(res["build_cost"].get("run") or "unlabelled", []).append("build cost")
    if set(by_run) == {"unlabelled"}:
        return []
    return [f"- {label}: {', '.join(items)}" for label, items in by_run.items()] + [""]


def markdown(res: dict) -> str:
    env = res.get("environment", {})
    lines = [f"# tensorforge benchmark — {env.get('gpu', '?')}", "",
             f"torch {env.get('torch')}, triton {env.get('triton')}, tensorforge {env.get('tensorforge')}; "
             f"median of {env.get('iters')} iterations after {env.get('warmup')} warm-up, CUDA events; "
             "± is the p10–p90 spread relative to the median. fp32 runs allow TF32.", ""]
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
        lines += ["## Model zoo (median ms)", "",
                  "| model | batch | dtype | " + " | ".join(RUNNERS) + " | tf / (compile+graph) | accuracy vs ORT fp32 |",
                  "| --- | --- | --- |" + " --- |" * (len(RUNNERS) + 2)]
        for row in res["zoo"]:
            if "error" in row:
                lines.append(f"| {row['model']} | {row['batch']} | {row['dtype']} | error: {row['error']} |" + " |" * (len(RUNNERS) + 1))
                continue
            acc = row.get("accuracy_vs_ort_fp32")
            if not acc:
                acc_txt = "—"
            elif "note" in acc:
                acc_txt = f"{'FAIL: ' if acc.get('pass') is False else 'n/a: '}{acc['note']}"
            else:
                ok = acc.get("pass", acc.get("allclose_1e-3_1e-4"))
                acc_txt = f"{'pass' if ok else 'FAIL'} (rel {acc['rel_to_max']:.1e}, cos {acc['cosine']:.5f}"
                if "torch_fp16_rel_to_max" in acc:
                    acc_txt += f"; torch fp16 rel {acc['torch_fp16_rel_to_max']:.1e}"
                acc_txt += ")"
            cells = [_ms(row["runners"].get(r)) for r in RUNNERS]
            lines.append(f"| {row['model']} | {row['batch']} | {row['dtype']} | " + " | ".join(cells) +
                         f" | {row.get('ratio_vs_compile_graph') or '—'} | {acc_txt} |")
        lines.append("")
        notes = [(r["model"], r["batch"], r["dtype"], k, v.get("error")) for r in res["zoo"] if "runners" in r
                 for k, v in r["runners"].items() if "error" in v]
        notes += [(r["model"], r["batch"], r["dtype"], "tensorforge graphs", r["graph_note"]) for r in res["zoo"]
                  if r.get("graph_note")]
        if notes:
            lines += ["Notes:", ""] + [f"- {m} b{b} {d} {k}: {e}" for m, b, d, k, e in notes] + [""]
        profiled = [r for r in res["zoo"] if r.get("profile_ops")]
        if profiled:
            lines += ["## Where tensorforge's time goes (per-layer profile, uncaptured, ms per op type)", ""]
            for r in profiled:
                top = ", ".join(f"{op} {ms:.3f}" for op, ms in list(r["profile_ops"].items())[:8])
                lines.append(f"- {r['model']} b{r['batch']} {r['dtype']}: {top}")
            lines.append("")
    if res.get("build_cost"):
        b = res["build_cost"]
        lines += ["## Build cost (resnet50)", "", "| cold s | warm s | speedup | same tactics |",
                  "| --- | --- | --- | --- |",
                  f"| {b.get('cold_s')} | {b.get('warm_s')} | {b.get('speedup')} | {b.get('same_tactics')} |"
                  if "error" not in b else f"| error: {b['error']} | | | |", ""]
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
    return files


def write(res: dict, out_dir: str, stem: str, plots: bool = True) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    jpath, mpath = os.path.join(out_dir, f"{stem}.json"), os.path.join(out_dir, f"{stem}.md")
    with open(jpath, "w") as f:
        json.dump(res, f, indent=1, sort_keys=False)
    with open(mpath, "w") as f:
        f.write(markdown(res))
    return [jpath, mpath] + (_plots(res, out_dir, stem) if plots else [])
