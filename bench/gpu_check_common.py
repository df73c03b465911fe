"""gpu_check's shared pieces: Row, `guard` (any failure → one table line), `compare`, `timed` (median ms).

compare: an element passes when |got − ref| ≤ atol + scale·max|ref| + rtol·|ref| (`scale` lets atol follow the
output's magnitude, for sums of many fp16 terms); integer and bool outputs must be equal; NaN where NaN.
"max rel err" = max |got − ref| / |ref| over elements with |ref| above that atol and above 1e-3·max|ref| (near
zero a relative error says nothing; the pass test covers those elements).
timed: CUDA events per call on GPU (bench/measure.py), wall clock on CPU; a slow call gets fewer repetitions.
"""

import dataclasses
import time
import traceback

import torch

from measure import cpu_times, cuda_times

MAX_TIMED_S = 2.0          # a slow reference gets fewer repetitions, never less than 3
REL_FLOOR = 1e-3           # relative errors are reported for |ref| ≥ REL_FLOOR·max|ref| only


@dataclasses.dataclass
class Row:
    section: str
    check: str
    shape: str = ""
    dtype: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    status: str = "FAIL"            # PASS, FAIL or SKIP (not run: the budget was spent, or the GPU context died)
    ms: float | None = None         # the tactic / plugin / engine: median of `reps`
    ref_ms: float | None = None     # its torch reference on the same device
    reps: int | None = None
    note: str = ""
    error: str = ""
    wall_s: float = 0.0             # seconds the check took, compilation included

    @property
    def speedup(self) -> float | None:
        return self.ref_ms / self.ms if self.ms and self.ref_ms else None


class Context:
    """What every check needs: device, repetitions, config limit, the rows so far, and the time budget."""

    def __init__(self, device: torch.device, smoke: bool, iters: int, max_configs: int, budget_s: float, on_row=None):
        self.device, self.smoke, self.iters, self.max_configs = device, smoke, iters, max_configs
        self.budget_s, self.start, self.rows, self.on_row = budget_s, time.perf_counter(), [], on_row
        self.broken = ""            # the check after which the CUDA context stopped working (sticky error)

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def one_line(e: BaseException) -> str:
    """'Type: message [file:line]'; a multi-line message (Triton's compilation errors quote the source first and
    name the cause last) keeps its first and last lines."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    text = " … ".join([lines[0], lines[-1]] if len(lines) > 1 else lines) or repr(e)
    where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    at = f" [{where.filename.rsplit('/', 1)[-1]}:{where.lineno}]" if where else ""
    return f"{type(e).__name__}: {text[:300]}{at}"


def guard(ctx: Context, section: str, check: str, shape: str, dtype: str, body) -> Row:
    """Run body(row); any exception becomes the row's one-line error. Past the budget, or once a sticky CUDA
    error (illegal address, device assert) has killed the context, the check is skipped with the reason."""
    row = Row(section, check, shape, dtype)
    if ctx.broken:
        row.status, row.error = "SKIP", f"not run: the CUDA context died during {ctx.broken}"
    elif ctx.elapsed() > ctx.budget_s:
        row.status, row.error = "SKIP", f"not run: the time budget ({ctx.budget_s:.0f} s) was spent"
    else:
        t0 = time.perf_counter()
        try:
            body(row)
            if row.status == "FAIL" and not (row.error or row.note):
                row.error = "the check reported no result"
        except Exception as e:  # noqa: BLE001 - every failure is a table line, the run goes on
            row.status, row.error = "FAIL", one_line(e)
        row.wall_s = round(time.perf_counter() - t0, 2)
        if ctx.device.type == "cuda":
            try:                                   # a sticky error surfaces here at the latest
                torch.cuda.synchronize(ctx.device)
                torch.zeros(1, device=ctx.device).add_(1).item()
                torch.cuda.empty_cache()
            except Exception as e:  # noqa: BLE001 - recorded; later checks are skipped with the reason
                row.status, row.error = "FAIL", row.error or one_line(e)
                ctx.broken = f"{section}/{check} {dtype}"
    ctx.rows.append(row)
    if ctx.on_row is not None:
        ctx.on_row(row)
    return row


def as_list(x) -> list:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def compare(got, want, rtol: float, atol: float, scale: float = 0.0, dtypes=None) -> dict:
    """Worst errors of got against want (tensors or lists of them) and whether every element is within tolerance.
    `dtypes`: the dtypes `got` must have (default: want's)."""
    got, want = as_list(got), as_list(want)
    dtypes = list(dtypes) if dtypes is not None else [w.dtype for w in want]
    out = {"max_abs": 0.0, "max_rel": 0.0, "ok": True, "notes": []}
    if len(got) != len(want):
        return {**out, "ok": False, "notes": [f"{len(got)} outputs, reference has {len(want)}"]}
    for i, (g, w, dt) in enumerate(zip(got, want, dtypes)):
        tag = f"out{i}: " if len(want) > 1 else ""
        if tuple(g.shape) != tuple(w.shape) or g.dtype != dt:
            out["ok"] = False
            out["notes"].append(f"{tag}{g.dtype}{list(g.shape)} vs reference {dt}{list(w.shape)}")
            continue
        g = g.to(w.device)
        if not w.dtype.is_floating_point:
            d = (g != w).long() if w.dtype == torch.bool else (g.long() - w.long()).abs()
            bad = int((d != 0).sum())
            out["max_abs"] = max(out["max_abs"], float(d.max().item()) if d.numel() else 0.0)
            if bad:
                out["ok"] = False
                out["notes"].append(f"{tag}{bad} of {w.numel()} integer values differ")
            continue
        g64, w64 = g.double(), w.double()
        nan_g, nan_w = torch.isnan(g64), torch.isnan(w64)
        if bool((nan_g != nan_w).any()):
            out["ok"] = False
            out["notes"].append(f"{tag}{int((nan_g != nan_w).sum())} NaN positions differ")
        both = ~(nan_g | nan_w)
        g64, w64 = g64[both], w64[both]
        if not w64.numel():
            continue
        inf_same = torch.isinf(w64) & (g64 == w64)
        diff = torch.where(inf_same, torch.zeros_like(w64), (g64 - w64).abs())
        ref_abs = torch.where(torch.isinf(w64), torch.zeros_like(w64), w64.abs())
        limit_abs = atol + scale * ref_abs.max().item()
        bad = int((diff > limit_abs + rtol * w64.abs()).sum())
        big = (ref_abs > limit_abs) & (ref_abs >= REL_FLOOR * ref_abs.max())
        out["max_abs"] = max(out["max_abs"], diff.max().item())
        if bool(big.any()):
            out["max_rel"] = max(out["max_rel"], (diff[big] / ref_abs[big]).max().item())
        if bad:
            out["ok"] = False
            out["notes"].append(f"{tag}{bad} of {w64.numel()} values outside rtol={rtol:g}, atol={limit_abs:.3g}")
    return out


def record(row: Row, stats: dict, what: str = "") -> bool:
    """Worst of several comparisons goes into the row (errors max, pass only if all passed)."""
    row.max_abs_err = max(row.max_abs_err or 0.0, stats["max_abs"])
    row.max_rel_err = max(row.max_rel_err or 0.0, stats["max_rel"])
    if not stats["ok"]:
        row.note = "; ".join(filter(None, [row.note] + [f"{what}{n}" for n in stats["notes"]]))
    return stats["ok"]


def timed(ctx: Context, fn) -> tuple[float, int]:
    """Median milliseconds of fn over ctx.iters calls (fewer, ≥ 3, when one call is slow); CUDA events on GPU."""
    if ctx.device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize(ctx.device)
        once = start.elapsed_time(end)
        reps = _reps(ctx.iters, once)
        times = cuda_times(fn, iters=reps, warmup=1)
    else:
        t0 = time.perf_counter()
        fn()
        once = (time.perf_counter() - t0) * 1e3
        reps = _reps(ctx.iters, once)
        times = cpu_times(fn, iters=reps, warmup=0)
    times.sort()
    return times[len(times) // 2], reps


def _reps(iters: int, once_ms: float) -> int:
    if once_ms * iters <= MAX_TIMED_S * 1e3:
        return iters
    return max(min(3, iters), int(MAX_TIMED_S * 1e3 / max(once_ms, 1e-3)))


def cfg_text(cfg: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(cfg.items())) or "default"


def shape_text(*shapes) -> str:
    return " · ".join("x".join(str(int(d)) for d in s) for s in shapes)


def check_against_reference(ctx: Context, row: Row, configs: list[dict], run_cfg, run_ref, ref_acc=None,
                            rtol: float = 1e-5, atol: float = 1e-5, scale: float = 0.0) -> None:
    """Every config (up to ctx.max_configs): outputs against the reference, then timed; the reference timed once.

    run_cfg(cfg) -> outputs of the kernel under test; run_ref() -> the torch reference in the same dtype (timed);
    ref_acc() -> the outputs to compare with when they differ from run_ref's (fp16 inputs: the reference on the
    same values widened to fp32). Output dtypes must match run_ref's."""
    native = as_list(run_ref())
    want = as_list(ref_acc()) if ref_acc is not None else native
    dtypes = [t.dtype for t in native]
    if ref_acc is not None:
        del native
    configs = list(configs)[:max(1, ctx.max_configs)]
    ok, best = True, None
    for cfg in configs:
        got = run_cfg(cfg)
        ctx.sync()
        tag = f"[{cfg_text(cfg)}] " if len(configs) > 1 else ""
        ok &= record(row, compare(got, want, rtol, atol, scale, dtypes), tag)
        del got
        ms, reps = timed(ctx, lambda: run_cfg(cfg))
        if best is None or ms < best[0]:
            best = (ms, reps, cfg)
    del want
    row.ms, row.reps = round(best[0], 4), best[1]
    row.ref_ms = round(timed(ctx, run_ref)[0], 4)
    used = f"best {cfg_text(best[2])} of {len(configs)} configs" if len(configs) > 1 else f"config {cfg_text(best[2])}"
    row.note = "; ".join(filter(None, [used, row.note]))
    row.status = "PASS" if ok else "FAIL"
