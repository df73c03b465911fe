"""The comparison as one self-contained HTML page: summary, per-output statistics, error histograms, per-layer table.

`write_html(report, path)` writes atomically. Histograms are inline SVG: drawn with matplotlib when it is
installed, otherwise by `svg_histogram` here (plain rects and text, no scripts, no external files), so the
page opens anywhere and diffs as text.
"""

import html
import io

from ..util.fileio import atomic_write
from .comparator import Histogram, OutputComparison
from .session import ComparisonReport

_CSS = """body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f3f3f3}td.l,th.l{text-align:left}
.pass{color:#17702b;font-weight:bold}.fail{color:#b00020;font-weight:bold}tr.first{background:#fde2e2}
.plots{display:flex;gap:1em;flex-wrap:wrap}"""


def svg_histogram(hist: Histogram, title: str, width: int = 420, height: int = 200) -> str:
    """Bars for `hist.counts` over its edges (plus an 'inf' bar when some errors are infinite)."""
    left, bottom, top, right = 48, 36, 24, 10
    counts = list(hist.counts) + ([hist.infinite] if hist.infinite else [])
    labels = [f"{e:.2g}" for e in hist.edges[:-1]] + (["inf"] if hist.infinite else [])
    peak = max(counts + [1])
    plot_w, plot_h = width - left - right, height - top - bottom
    bar_w = plot_w / max(len(counts), 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img"><title>{html.escape(title)}</title>',
             f'<text x="{width / 2:.0f}" y="16" text-anchor="middle" font-size="13">{html.escape(title)}</text>',
             f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#444"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#444"/>',
             f'<text x="{left - 4}" y="{top + 4}" text-anchor="end" font-size="10">{peak}</text>',
             f'<text x="{left - 4}" y="{top + plot_h}" text-anchor="end" font-size="10">0</text>']
    for i, (n, label) in enumerate(zip(counts, labels)):
        h = plot_h * n / peak
        x = left + i * bar_w
        colour = "#b00020" if label == "inf" else "#3b6ea8"
        parts.append(f'<rect x="{x + 1:.1f}" y="{top + plot_h - h:.1f}" width="{max(bar_w - 2, 1):.1f}" '
                     f'height="{h:.1f}" fill="{colour}"><title>{label}: {n}</title></rect>')
        parts.append(f'<text x="{x + bar_w / 2:.1f}" y="{top + plot_h + 12}" text-anchor="middle" '
                     f'font-size="9">{html.escape(label)}</text>')
    if hist.edges:
        parts.append(f'<text x="{left + plot_w:.0f}" y="{height - 4}" text-anchor="end" font-size="10">'
                     f'upper edge {hist.edges[-1]:.3g}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _mpl_histogram(hist: Histogram, title: str) -> str:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.4, 2.1))
    widths = [b - a for a, b in zip(hist.edges, hist.edges[1:])]
    ax.bar(hist.edges[:-1], hist.counts, width=widths, align="edge", color="#3b6ea8")
    ax.set_title(title + (f" (+{hist.infinite} inf)" if hist.infinite else ""), fontsize=9)
    ax.set_ylabel("elements", fontsize=8)
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def histogram_svg(hist: Histogram, title: str) -> str:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return svg_histogram(hist, title)
    return _mpl_histogram(hist, title)


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def _output_rows(outputs: list[OutputComparison]) -> str:
    rows = []
    for o in outputs:
        cls = "pass" if o.passed else "fail"
        rows.append(f"<tr><td class=l>{html.escape(o.name)}</td><td class='{cls}'>{'PASSED' if o.passed else 'FAILED'}"
                    f"</td><td>{o.failed} / {o.total}</td><td>{_fmt(o.max_abs)}</td><td>{_fmt(o.mean_abs)}</td>"
                    f"<td>{_fmt(o.median_abs)}</td><td>{_fmt(o.max_rel)}</td><td>{_fmt(o.mean_rel)}</td>"
                    f"<td>{_fmt(o.median_rel)}</td><td class=l>{html.escape(o.reason)}</td></tr>")
    return "".join(rows)


_HEAD = ("<tr><th class=l>output</th><th>verdict</th><th>failed / total</th><th>max abs</th><th>mean abs</th>"
         "<th>median abs</th><th>max rel</th><th>mean rel</th><th>median rel</th><th class=l>reason</th></tr>")


def render_html(report: ComparisonReport) -> str:
    verdict = "PASSED" if report.passed else "FAILED"
    body = [f"<h1>tensorforge compare: {html.escape(report.model)}</h1>",
            f"<p class='{'pass' if report.passed else 'fail'}'>{verdict}</p>",
            f"<p>reference runner <b>{html.escape(report.runners[0])}</b>; atol={report.atol:g}, rtol={report.rtol:g} "
            "(an element fails only if it exceeds both); seed " + str(report.seed) + "</p>",
            "<p>inputs: " + html.escape(", ".join(f"{k} {v}" for k, v in report.inputs.items())) + "</p>"]
    body += [f"<p>note: {html.escape(n)}</p>" for n in report.notes]
    for pair in report.pairs:
        body.append(f"<h2>{html.escape(pair.runner)} vs {html.escape(pair.reference)}</h2>")
        body.append(f"<table>{_HEAD}{_output_rows(pair.outputs)}</table>")
        for o in pair.outputs:
            if o.abs_hist is None:
                continue
            body.append(f"<h3>{html.escape(o.name)}</h3><div class=plots>"
                        + histogram_svg(o.abs_hist, f"{o.name}: absolute error")
                        + histogram_svg(o.rel_hist, f"{o.name}: relative error") + "</div>")
    for pl in report.per_layer:
        first = pl.first
        body.append(f"<h2>per layer: {html.escape(pl.runner)} vs {html.escape(pl.reference)}</h2>")
        body.append("<p>first divergence: " + ("none" if first is None else
                    f"node <b>{html.escape(first.node)}</b> ({html.escape(first.op_type)}), output "
                    f"{html.escape(first.tensor)}; {html.escape(first.how)}") + "</p>")
        rows = []
        for r in pl.rows:
            c = r.comparison
            cls = " class=first" if r is first else ""
            rows.append(f"<tr{cls}><td class=l>{html.escape(r.node)}</td><td class=l>{html.escape(r.op_type)}</td>"
                        f"<td class=l>{html.escape(r.tensor)}</td><td class='{'pass' if c.passed else 'fail'}'>"
                        f"{'ok' if c.passed else 'FAILED'}</td><td>{_fmt(c.max_abs)}</td><td>{_fmt(c.max_rel)}</td>"
                        f"<td class=l>{html.escape(r.how)}</td></tr>")
        body.append("<table><tr><th class=l>node</th><th class=l>op</th><th class=l>tensor</th><th>verdict</th>"
                    "<th>max abs</th><th>max rel</th><th class=l>computed by</th></tr>" + "".join(rows) + "</table>")
        if pl.missing:
            body.append("<p>not returned (folded or aliased): " + html.escape(", ".join(pl.missing)) + "</p>")
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>tensorforge compare</title>"
            f"<style>{_CSS}</style></head><body>" + "\n".join(body) + "</body></html>\n")


def write_html(report: ComparisonReport, path) -> None:
    atomic_write(path, render_html(report))
