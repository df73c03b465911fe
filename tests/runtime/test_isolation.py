"""Loading and running an engine needs none of the parser, passes or builder, nor onnx (DESIGN.md; issue 13).

Engines are built here and saved; a fresh interpreter loads and runs them through `tensorforge.runtime` alone
(Runtime.deserialize, load_engine_file, ExecutionContext) or through `tfg.load`, then lists which forbidden modules
are in sys.modules — none may be. Engines: a pointwise chain stored as a GPU build stores it (run as its
regenerated Triton kernel in the interpreter, the device check faked as in test_engine_is_data.py, so codegen/ is
on the path), a small CNN, and the seed model with the custom::MyGelu library plugin. The child checks each output
against a closed form (the runs are real), and a child broken on purpose (it imports the parser) must be caught.
A CPU engine also loads and runs without importing Triton (optional tactics load on first need).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tensorforge as tfg
import tensorforge.plugin as tfp
from oracle import export
from seed_models import MyNetPlugin
from test_engine_is_data import edit

import rt_models

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("tensorforge.parser", "tensorforge.passes", "tensorforge.builder", "tensorforge.compare", "onnx",
             "onnxruntime")

CHILD = r"""
import json, sys
import torch
ENTRY, JOBS, BREAK = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] == "1"
if ENTRY == "tfg":
    import tensorforge as tfg
else:
    import tensorforge.runtime as r
# the generated tactic's device check passes on the CPU (its kernels run in the interpreter); CPU-built
# engines have no generated-kernel layers, so this changes nothing for them
from tensorforge.kernels import triton_pointwise
triton_pointwise.triton_device_reason = lambda device: None
assert "triton" not in sys.modules, "importing the runtime imported Triton"
if BREAK:
    import tensorforge.parser  # noqa: F401  (the check must see this)


def case(expect):
    torch.manual_seed(0)
    if expect == "affine":
        x = torch.randn(3, 4)
        return x, lambda y: torch.allclose(y, torch.relu(x * 2 + torch.linspace(-1, 1, 4)) - x, rtol=1e-5, atol=1e-6)
    if expect == "gelu2":
        x = torch.randn(2, 16)
        gelu = torch.nn.functional.gelu
        return x, lambda y: torch.allclose(y, gelu(gelu(x)), rtol=1e-5, atol=1e-6)
    x = torch.randn(1, 3, 8, 8)             # conv → BN → ReLU → 1×1 conv → sigmoid: shape and range
    return x, lambda y: y.shape == (1, 4, 8, 8) and bool(((y > 0) & (y < 1)).all())


report = {}
for path, expect in JOBS:
    x, good = case(expect)
    if ENTRY == "tfg":
        engine = tfg.load(path, device="cpu")
        runs = [(engine.context, engine.run({engine.input_names[0]: x}))]
    else:
        data = open(path, "rb").read()
        runs = []
        for eng in (r.Runtime("cpu").deserialize(data), r.load_engine_file(path)):
            ctx = r.ExecutionContext(eng, "cpu")
            runs.append((ctx, ctx.run({eng.input_names[0]: x})))
    report[expect] = {"ok": all(good(next(iter(y.values()))) for _, y in runs),
                      "substituted": sorted(n for ctx, _ in runs for n in ctx.substituted)}
report["loaded"] = sorted(m for m in sys.modules if m.startswith(%r))
report["triton"] = "triton" in sys.modules
report["dynamo"] = "torch._dynamo" in sys.modules      # torch imports Triton itself when dynamo loads
print("RESULT" + json.dumps(report))
""" % (FORBIDDEN,)
JOBS = [("chain.engine", "affine"), ("cnn.engine", "cnn"), ("plugin.engine", "gelu2")]


def run_child(folder, entry="runtime", broken=False, jobs=JOBS):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(ROOT)
    env["TRITON_INTERPRET"] = "1"
    jobs = json.dumps([(str(folder / name), expect) for name, expect in jobs])
    proc = subprocess.run([sys.executable, "-c", CHILD, entry, jobs, "1" if broken else "0"],
                          capture_output=True, text=True, env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.split("RESULT", 1)[1])


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    folder = tmp_path_factory.mktemp("isolation")
    chain = tfg.build(rt_models.affine_relu(), device="cpu", shapes={"x": ((1, 4), (3, 4), (8, 4))})
    (folder / "chain.engine").write_bytes(edit(chain.serialize(), lambda m, a: None))    # as a GPU build stores it
    rng = np.random.default_rng(0)
    cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                              torch.nn.Conv2d(4, 4, 1), torch.nn.Sigmoid())
    with torch.no_grad():
        cnn[1].running_mean.copy_(torch.from_numpy(rng.standard_normal(4).astype(np.float32)))
    tfg.build(export(cnn, (torch.randn(1, 3, 8, 8),)), device="cpu").save(folder / "cnn.engine")
    with tfp.scope():     # the library plugin registered for this build is deregistered after it (test isolation)
        tfg.build(export(MyNetPlugin(), (torch.randn(2, 16),), opset=17), device="cpu").save(folder / "plugin.engine")
    return folder


@pytest.mark.parametrize("entry", ["runtime", "tfg"])
def test_engines_load_and_run_without_the_build_rooms(engines, entry):
    got = run_child(engines, entry)
    assert all(got[expect]["ok"] for _, expect in JOBS), got
    assert got["affine"]["substituted"] == [], got           # the chain ran as its regenerated Triton kernel
    assert got["loaded"] == [], got


def test_a_cpu_engine_needs_no_triton_and_the_check_sees_a_forbidden_import(engines):
    """The CNN engine alone (CPU tactics only): tensorforge never imports Triton (kernels/registry.py
    optional_tactics) — torch does, when something loads torch._dynamo (a meta-tensor decomposition does: the
    engine reader's inference check runs ops on meta tensors). The same child imports the parser on purpose,
    which the check must report."""
    got = run_child(engines, broken=True, jobs=JOBS[1:2])
    assert got["cnn"]["ok"] and (got["dynamo"] or not got["triton"]), got
    assert "tensorforge.parser" in got["loaded"]
