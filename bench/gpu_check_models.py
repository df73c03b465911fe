"""gpu_check sections 3 and 4: the 9 light ONNX models built for the device, and the seed example.

Light models (onnx/backend/test/data/light), with the weights re-seeded by tests/models/light_reseed.py (onnx's
own weights are ConstantOfShape(0.02): the output is a constant whatever the input, so it checks nothing):
`tfg.build(…, device, tf32=False)` on two inputs vs onnxruntime CPU fp32 on the same re-seeded model (rtol 1e-3,
atol 1e-4), then saved to a temporary file, `tfg.load`ed and compared again. PASS needs both: every output within
tolerance, and the two inputs' onnxruntime outputs ≥ 100× the tolerance apart somewhere (an input-dependent
output; the note gives that factor). ms = engine latency, device tensors.
Seed example: examples/gelu/run.py is started first (`start_example`) and runs beside the other checks (its GPU
work is short; its time goes to export and JSON), then collected (`finish_example`): exit status, summary block,
one row per export. Files over 16 MiB it leaves in DIR/gelu are removed (unless kept) so DIR stays small.
"""

import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import torch

import tensorforge as tfg

from gpu_check_common import compare, guard, record, timed

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "models"))
from light_reseed import light_input, reseeded  # noqa: E402  (tests/models: the re-seeder the CPU tests use)

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
EXPECTED_MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
                   "squeezenet", "vgg19", "zfnet512"]
RTOL, ATOL = 1e-3, 1e-4
MIN_SENSITIVITY = 100.0


def names() -> list[str]:
    return EXPECTED_MODELS


def _ort(model_bytes: bytes, feeds: dict) -> tuple[dict, float]:
    import onnxruntime as ort
    sess = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    outs = [o.name for o in sess.get_outputs()]
    t0 = time.perf_counter()
    values = sess.run(None, feeds)
    return dict(zip(outs, values)), (time.perf_counter() - t0) * 1e3


def _compare_outputs(row, got: dict, want: dict, what: str = "") -> bool:
    if set(got) != set(want):
        row.note = f"outputs {sorted(got)} vs onnxruntime {sorted(want)}"
        return False
    names_ = sorted(want)
    stats = compare([got[n] for n in names_], [torch.from_numpy(np.asarray(want[n])) for n in names_], RTOL, ATOL)
    return record(row, stats, what)


def sensitivity(want0: dict, want1: dict) -> float:
    """max |y0 − y1| / (atol + rtol·|y1|) over the outputs: how far apart two inputs' oracle outputs are."""
    return max(float(np.max(np.abs(want0[n] - want1[n]) / (ATOL + RTOL * np.abs(want1[n])))) for n in want0)


def run_light(ctx, only: set | None = None) -> None:
    found = sorted(f.name[len("light_"):-len(".onnx")] for f in LIGHT.glob("light_*.onnx")) if LIGHT.is_dir() else []
    if found != EXPECTED_MODELS:
        guard(ctx, "models", "light model set", "", "", lambda row: _raise(
            FileNotFoundError(f"{LIGHT} holds {found or 'nothing'}, expected the 9 light models")))
    tmp = Path(tempfile.mkdtemp(prefix="gpu_check_engines_"))
    try:
        for name in found:
            if only is not None and name not in only:
                continue
            built = {}
            guard(ctx, "models", f"light_{name}", "", "fp32", lambda row, n=name: _build_and_check(ctx, row, n, built))
            guard(ctx, "models", f"light_{name} save+load", "", "fp32",
                  lambda row, n=name: _reload_and_check(ctx, row, n, built, tmp))
            built.clear()
    finally:
        for f in tmp.glob("*"):
            f.unlink()
        tmp.rmdir()


def _build_and_check(ctx, row, name, built):
    original = onnx.load(str(LIGHT / f"light_{name}.onnx"))     # the small file: the input's name and shape
    t0 = time.perf_counter()
    model_bytes = reseeded(name)                                   # cached in the temp folder after the first run
    seed_s = time.perf_counter() - t0
    xs = [light_input(original, seed) for seed in (0, 1)]
    (data_name, x), = xs[0].items()
    row.shape = "x".join(map(str, x.shape))
    wants, ort_ms = zip(*[_ort(model_bytes, x_) for x_ in xs])
    apart = sensitivity(*wants)
    t0 = time.perf_counter()
    engine = tfg.build(model_bytes, device=str(ctx.device), tf32=False)
    build_s = time.perf_counter() - t0
    feeds = [{data_name: torch.from_numpy(x_[data_name]).to(ctx.device)} for x_ in xs]
    ok = True
    for i, (feed, want) in enumerate(zip(feeds, wants)):
        got = engine.run(feed)
        ctx.sync()
        ok = _compare_outputs(row, got, want, f"input {i}: ") and ok
    if apart < MIN_SENSITIVITY:
        ok = False
        row.note = f"output hardly depends on the input ({apart:.1f}× tol < {MIN_SENSITIVITY:g}×)"
    ms, row.reps = timed(ctx, lambda: engine.run(feeds[0]))
    row.ms = round(ms, 4)
    row.note = "; ".join(filter(None, [f"re-seeded ({seed_s:.1f} s), inputs {apart:.0f}× tol apart",
                                       f"build {build_s:.1f} s, onnxruntime CPU {ort_ms[0]:.1f} ms",
                                       _tactics(engine), row.note]))
    row.status = "PASS" if ok else "FAIL"
    built.update(engine=engine, feed=feeds[1], want=wants[1])


def _tactics(engine) -> str:
    """'74 layers: fusedconv.torch_conv×33, …': which tactics the build chose (the 4 most used)."""
    count = Counter(str(layer.tactic).partition("[")[0] for layer in engine.data.layers)
    top = ", ".join(f"{name}×{n}" for name, n in count.most_common(4))
    return f"{len(engine.data.layers)} layers: {top}" + (", …" if len(count) > 4 else "")


def _reload_and_check(ctx, row, name, built, tmp: Path):
    if "engine" not in built:
        raise RuntimeError("the engine was not built (see the row above)")
    path = tmp / f"{name}.engine"
    built["engine"].save(path)
    size = path.stat().st_size
    engine = tfg.load(path, device=str(ctx.device))
    got = engine.run(built["feed"])
    ctx.sync()
    ok = _compare_outputs(row, got, built["want"])
    ms, row.reps = timed(ctx, lambda: engine.run(built["feed"]))
    row.ms = round(ms, 4)
    row.note = "; ".join(filter(None, [f"engine file {size / 2**20:.1f} MiB", row.note]))
    row.status = "PASS" if ok else "FAIL"
    path.unlink()


def _raise(e):
    raise e


# ---- the seed example ------------------------------------------------------------------------------------------
def start_example(out_dir: Path, elements: int, smoke: bool) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    log_path = out_dir / "run.log"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    if smoke:                              # the example as a CPU user runs it: torch paths, no interpreter
        env.pop("TRITON_INTERPRET", None)
        env["CUDA_VISIBLE_DEVICES"] = ""
    cmd = [sys.executable, str(ROOT / "examples" / "gelu" / "run.py"), "--elements", str(elements),
           "--out", str(out_dir)]
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, cwd=str(ROOT), env=env, stdout=log, stderr=subprocess.STDOUT)
    return {"proc": proc, "log": log, "log_path": log_path, "cmd": cmd, "start": time.perf_counter(),
            "elements": elements, "out_dir": out_dir}


def finish_example(ctx, handle: dict, timeout_s: float, keep: bool) -> dict:
    """Wait for the example (until `timeout_s` after its start), record its rows, return its summary."""
    proc = handle["proc"]
    left = max(1.0, timeout_s - (time.perf_counter() - handle["start"]))
    timed_out = False
    try:
        proc.wait(timeout=left)
    except subprocess.TimeoutExpired:
        timed_out = True
        proc.kill()
        proc.wait()
    handle["log"].close()
    seconds = time.perf_counter() - handle["start"]
    text = handle["log_path"].read_text(errors="replace")
    summary = _summary_block(text)
    removed = [] if keep else _remove_big_files(handle["out_dir"])
    shape = f"{handle['elements']} elements"

    def overall(row):
        row.note = f"{seconds:.0f} s; log {handle['log_path']}"
        if timed_out:
            raise TimeoutError(f"examples/gelu/run.py still running after {timeout_s:.0f} s; killed "
                               f"(last line: {_last_line(text)})")
        if proc.returncode != 0:
            raise RuntimeError(f"examples/gelu/run.py exit code {proc.returncode}: {_last_line(text)}")
        row.status = "PASS"
    guard_row = guard(ctx, "example", "examples/gelu/run.py", shape, "fp32", overall)
    guard_row.wall_s = round(seconds, 1)
    for case, compute, oracle, err, verdict in _case_lines(summary):
        def case_row(row, compute=compute, oracle=oracle, err=err, verdict=verdict):
            median = re.search(r"median = ([0-9.eE+-]+) ms", compute)
            row.ms = float(median.group(1)) if median else None
            row.max_abs_err = float(err)
            mean = re.search(r"mean = ([0-9.eE+-]+) ms", compute)
            row.note = f"vs {oracle}; ms: its GPU Compute Time median" + (f" (mean {mean.group(1)})" if mean else "")
            row.status = "PASS" if verdict == "OK" else "FAIL"
        guard(ctx, "example", f"gelu example: {case}", shape, "fp32", case_row)
    return {"cmd": " ".join(handle["cmd"]), "returncode": proc.returncode, "timed_out": timed_out,
            "seconds": round(seconds, 1), "summary": summary, "removed_files": removed,
            "log": str(handle["log_path"]), "log_tail": text.splitlines()[-15:]}


def _summary_block(text: str) -> list[str]:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("=== seed GELU example ==="):
            return lines[i:]
    return []


def _case_lines(summary: list[str]):
    """(case, compute-time text, oracle, max |diff|, OK/MISMATCH) from run.py's two lines per export."""
    for first, second in zip(summary, summary[1:]):
        head = re.match(r"^(\w+)\s+(.*)$", first)
        tail = re.match(r"^\s+vs (\S+): max \|diff\| (\S+) -> (OK|MISMATCH)", second)
        if head and tail and not first.startswith("==="):
            yield head.group(1), head.group(2), tail.group(1), tail.group(2), tail.group(3)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "no output"


def _remove_big_files(folder: Path, limit: int = 16 * 2**20) -> list[str]:
    removed = []
    for f in sorted(folder.rglob("*")):
        if f.is_file() and f.stat().st_size > limit:
            removed.append(f"{f.name} ({f.stat().st_size / 2**20:.0f} MiB)")
            f.unlink()
    return removed
