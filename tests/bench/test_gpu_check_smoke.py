"""bench/gpu_check.py --smoke: the GPU verification script run on the CPU (TRITON_INTERPRET=1, tiny shapes) on one
plugin and one light model, as a subprocess exactly as the lead runs it; then the shape of what it writes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROW_KEYS = {"section", "check", "shape", "dtype", "max_abs_err", "max_rel_err", "status", "ms", "ref_ms", "reps",
            "note", "error", "wall_s", "speedup"}


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_check")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--out", str(out), "--smoke",
                           "--plugins", "leaky_relu", "--kernels", "none", "--models", "squeezenet", "--skip-example"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    return proc, out


def test_smoke_run_passes_and_prints_the_table(smoke_run):
    proc, _ = smoke_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "| section | check | shape | dtype | max abs err |" in proc.stdout


def test_json_shape(smoke_run):
    _, out = smoke_run
    data = json.loads((out / "gpu_check.json").read_text())
    assert set(data) == {"meta", "summary", "rows", "example"}
    assert data["meta"]["smoke"] is True and data["meta"]["device"] == "cpu" and data["example"] is None
    rows = data["rows"]
    assert all(set(r) == ROW_KEYS for r in rows)
    got = [(r["section"], r["check"], r["dtype"], r["status"]) for r in rows]
    assert got == [("plugins", "LeakyReLU alpha=0.1", "fp32", "PASS"),
                   ("plugins", "LeakyReLU alpha=0.1", "fp16", "PASS"),
                   ("models", "light_squeezenet", "fp32", "PASS"),
                   ("models", "light_squeezenet save+load", "fp32", "PASS")]
    assert data["summary"] == {"PASS": 4, "FAIL": 0, "SKIP": 0}
    relu32, relu16, model, reloaded = rows
    assert relu32["max_abs_err"] == 0.0                      # leaky_relu in fp32 is exact against torch
    assert 0 < relu16["max_abs_err"] <= 1e-3                 # fp16 output against the fp32 reference: rounding only
    for r in rows:
        assert r["ms"] > 0 and r["reps"] == 3 and r["error"] == ""
    assert relu32["ref_ms"] > 0 and relu32["speedup"] == pytest.approx(relu32["ref_ms"] / relu32["ms"])
    assert model["shape"] == "1x3x224x224" and "layers:" in model["note"] and model["max_abs_err"] <= 1e-4
    assert "engine file" in reloaded["note"]
    md = (out / "gpu_check.md").read_text()
    assert md.count("| PASS |") == 4 and "4 pass, 0 fail, 0 skipped" in md


@pytest.fixture()
def common():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import gpu_check_common
        yield gpu_check_common
    finally:
        sys.path.remove(str(ROOT / "bench"))


def test_a_failure_is_one_row_and_the_budget_skips(common):
    import torch
    ctx = common.Context(torch.device("cpu"), True, 3, 1, 60.0)
    row = common.guard(ctx, "plugins", "bad", "", "fp32", lambda r: 1 / 0)
    assert row.status == "FAIL" and "\n" not in row.error
    assert row.error.startswith("ZeroDivisionError: division by zero")
    late = common.Context(torch.device("cpu"), True, 3, 1, -1.0)
    ran = []
    skipped = common.guard(late, "plugins", "late", "", "fp32", lambda r: ran.append(1))
    assert skipped.status == "SKIP" and "budget" in skipped.error and not ran
    assert [r.check for r in ctx.rows] == ["bad"] and [r.check for r in late.rows] == ["late"]


def test_compare_tolerance_semantics(common):
    import torch
    want = torch.tensor([100.0, 1.0, 0.0, float("nan"), float("inf")])
    got = torch.tensor([100.1, 1.0005, 2e-4, float("nan"), float("inf")])
    s = common.compare(got, want, rtol=1e-3, atol=1e-4, scale=1e-6)      # atol_eff = 1e-4 + 1e-6·100 = 2e-4
    assert s["ok"] and s["max_abs"] == pytest.approx(0.1, rel=1e-3)
    assert s["max_rel"] == pytest.approx(1e-3, rel=1e-2)                 # 0.1/100 and 5e-4/1; not 2e-4/0
    s = common.compare(got, want, rtol=1e-3, atol=1e-4)                  # 2e-4 > 1e-4 at the zero: fails
    assert not s["ok"] and "1 of 4 values outside" in s["notes"][0]          # the NaN pair is not counted
    s = common.compare([torch.tensor([1, 2, 3])], [torch.tensor([1, 2, 5])], 0.0, 0.0)
    assert not s["ok"] and s["max_abs"] == 2 and "1 of 3 integer values differ" in s["notes"][0]
    s = common.compare(torch.zeros(2, 3, dtype=torch.float16), torch.zeros(2, 3), 0.0, 0.0)
    assert not s["ok"] and "torch.float16[2, 3] vs reference torch.float32[2, 3]" in s["notes"][0]
    s = common.compare(torch.tensor([float("nan"), 1.0]), torch.tensor([0.0, 1.0]), 0.0, 0.0)
    assert not s["ok"] and "NaN positions differ" in s["notes"][0]


def test_full_size_cases_fit_their_plugins_and_tactics(common):
    """The GPU run is rare: every realistic-size case is checked here on the meta device — inputs accepted by the
    plugin's descriptor with its typed attributes, every library folder covered, every kernel case reaching its
    registered tactic — so a shape or attribute mistake cannot waste it."""
    import torch

    import gpu_check_kernels as K
    import gpu_check_plugins as P
    import tensorforge.plugin as tfp
    from tensorforge.plugin import TensorDesc
    from tensorforge.plugin.library import LIBRARY
    meta = torch.device("meta")
    assert set(LIBRARY.values()) == {c[0] for c in P.CASES}              # nothing in the library left unchecked
    with tfp.scope():
        for folder, op_type, ident, label, make, dtypes, _ in P.CASES:
            tfp.discover(op_type)
            p = tfp.get(ident)
            for d in dtypes:
                inputs, raw = make(P.DTYPES[d], meta, False)
                outs = p.describe([TensorDesc.of(t) for t in inputs], p.typed_attrs(raw))
                assert all(o.dtype in (torch.int32, P.DTYPES[d]) for o in outs), (label, d)
    (x,), _ = P.gelu(torch.float32, meta, False, "none")
    assert x.numel() == 64 * 2**20                                       # the brief's size for elementwise plugins
    for label, name, make, dtypes, _ in K.CASES:
        for d in dtypes:
            op, inputs, attrs = make(meta, False, K.DTYPES[d])
            layer = K._layer(op, len(inputs), attrs)
            if op == "PointwiseChain":
                K._prepare_chain(layer, inputs)
            tactic = K.find_tactic(op, name)
            assert "CUDA" in tactic.supports(layer, torch.device("cpu")) and tactic.configs, (label, d)
