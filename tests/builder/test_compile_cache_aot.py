"""Ahead-of-time Triton compiles of a build (builder/precompile.py, kernels/compile_cache.CompilePool) with real
sm_90 compiles and no GPU: a stand-in CUDA driver (target sm_90) lets Triton's JIT specialise and reach the
compile step on CPU tensors, in a subprocess (TRITON_INTERPRET=1 is set for the test session).

Oracles independent of the code under test: Triton's own compilation listener, which reports every compile as a
cache hit or a miss, and the entries Triton wrote in the cache folder; the number of distinct variants counted
by hand (two distinct chain sources × two configs — three layers, two of them the same chain). The control build
without workers shows those misses when nothing was compiled ahead. Also: Triton 3.6's specialisation data has
no target (simulated here by dropping it): the jobs still carry the launching device's, and compile.
"""

import json
import os
import subprocess
import sys

import pytest

SCRIPT = r'''
import json, os, sys
import torch, triton
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.runtime import driver
import triton.runtime.jit as jit
from tensorforge.codegen import generate_pointwise
from tensorforge.ir import Layer
from tensorforge.kernels import candidates, generated
from tensorforge.kernels import compile_cache as cc
from tensorforge.builder.precompile import discover_jobs, queue_ahead

root, drop_target, mode = sys.argv[1], sys.argv[2] == "1", sys.argv[3]

class StandInCuda:                      # what Triton's JIT asks of a driver before it compiles
    target = GPUTarget("cuda", 90, 32)
    def is_active(self): return True
    def get_current_target(self): return self.target
    def get_current_device(self): return 0
    def set_current_device(self, d): pass
    def get_current_stream(self, device=None): return 0
    def get_active_torch_device(self): return torch.device("cpu")
driver.set_active(StandInCuda())

if drop_target:                         # Triton 3.6: specialization_data has no "target"
    original = jit.serialize_specialization_data
    def without_target(*a, **k):
        d = json.loads(original(*a, **k)); d.pop("target", None); return json.dumps(d)
    jit.serialize_specialization_data = without_target

def chain(name, op):
    layer = Layer(name, "PointwiseChain", ["x"], ["y"],
                  {"steps": [{"op": op, "args": ["in0"], "attrs": {}}], "outputs": ["s0"], "out_dtypes": ["float16"]})
    layer.attrs["kernel"] = generated.register_source(generate_pointwise(layer, [torch.float16], 1))
    return layer

LAYERS = [chain("a", "Relu"), chain("b", "Relu"), chain("c", "Sigmoid")]      # a and b: the same kernel source
CONFIGS = [{"BLOCK": 1024, "warps": 4}, {"BLOCK": 512, "warps": 4}]
X = torch.randn(1, 64, 14, 14, dtype=torch.float16)

def found(layer):
    pairs, _ = candidates(layer, torch.device("cuda"))
    return [(t, c) for t, c in pairs if t.name == "triton_generated" and c in CONFIGS]

class Walk:
    device = torch.device("cpu")
    def materialize(self, layer): return [X.clone()]
    def untimed(self, layer): pass

def launches_after(state):
    """Every candidate of every layer launched in this process: Triton compiles (miss) or loads (hit) each
    variant once (a second layer of the same variant finds it in Triton's in-memory cache: no event)."""
    seen, build_listener = {"hit": 0, "miss": 0}, knobs.compilation.listener      # for_build's counter

    def listener(**kw):
        seen["hit" if kw["cache_hit"] else "miss"] += 1
        build_listener(**kw)
    knobs.compilation.listener = listener
    for layer in LAYERS:
        for tac, cfg in found(layer):
            try:
                tac.build(layer, cfg, torch.device("cpu"))([X.clone()])
            except Exception:
                pass                    # the stand-in driver cannot launch; the compile (or load) happened first
    knobs.compilation.listener = build_listener
    return seen

out = {}
if mode == "warm":                      # a fresh process, the folder the workers filled: nothing to compile
    with cc.for_build("cuda:test:sm_90", root, workers=2) as warm:
        queue_ahead(LAYERS, Walk(), warm.pool, lambda layer: (lambda inputs: found(layer)))
        out["warm_cached"], out["warm_started"] = warm.pool.cached, warm.pool._pool is not None
    print("REPORT" + json.dumps(out))
    sys.exit(0)
if mode == "control":                   # a fresh process without workers: the launches compile in-process
    with cc.for_build("cuda:control:sm_90", root, workers=0) as state:
        out["control"] = launches_after(state)
    out["control_entries"], out["control_inline"] = state.compiled, state.inline
    print("REPORT" + json.dumps(out))
    sys.exit(0)
if mode == "late_env":                  # the parent's Triton environment changes after the workers started
    with cc.for_build("cuda:late:sm_90", root, workers=2) as state:
        pool = state.pool
        queue_ahead(LAYERS, Walk(), pool, lambda layer: (lambda inputs: found(layer)))
        pool.wait(list(pool._futures))  # the workers are up and have compiled under the first environment
        os.environ["TRITON_DISABLE_LINE_INFO"] = "1"    # cache-invalidating, as torch's TRITON_PTXAS_PATH is
        for layer in LAYERS:
            _, jobs = discover_jobs(layer, found(layer), [X.clone()], torch.device("cpu"))
            pool.compile_all(jobs)
        out["late_failed"] = dict(pool.failed)
        out["late_parent"] = launches_after(state)
    out["late_inline"] = state.inline
    print("REPORT" + json.dumps(out))
    sys.exit(0)
with cc.for_build("cuda:test:sm_90", root, workers=2) as state:
    pool = state.pool
    queued = queue_ahead(LAYERS, Walk(), pool, lambda layer: (lambda inputs: found(layer)))
    out["queued_jobs"], out["variants_after_queue"] = queued["jobs"], pool.variants
    for layer in LAYERS:                # the timing loop: each layer's jobs again, waited for
        _, jobs = discover_jobs(layer, found(layer), [X.clone()], torch.device("cpu"))
        out.setdefault("per_layer_ok", []).append(pool.compile_all(jobs))
        out.setdefault("targets", []).extend(json.loads(j[3]).get("target") for j in jobs)
    out["worker_jobs"], out["failed"] = pool.jobs, dict(pool.failed)
    out["parent"] = launches_after(state)
out["entries"], out["inline"] = state.compiled, state.inline
print("REPORT" + json.dumps(out))
'''


def _run(tmp_path, drop_target: bool, mode: str = "workers") -> dict:
    pytest.importorskip("triton.backends.nvidia", reason="Triton's NVIDIA backend is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TRITON_CACHE_DIR")}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), "1" if drop_target else "0", mode],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.split("REPORT", 1)[1])


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("aot")
    return {**_run(root, drop_target=True), **_run(root, drop_target=False, mode="warm"),
            **_run(root, drop_target=False, mode="control"), **_run(root, drop_target=False, mode="late_env")}


def test_each_distinct_variant_is_compiled_once(report):
    assert report["queued_jobs"] == 6                     # 3 layers × 2 configs discovered up front
    assert report["variants_after_queue"] == 4            # 2 sources × 2 configs: a and b share theirs
    assert report["worker_jobs"] == 4 and report["entries"] == 4 and not report["failed"]
    assert report["per_layer_ok"] == [2, 2, 2]


def test_the_launching_process_loads_what_the_workers_compiled(report):
    assert report["parent"] == {"hit": 4, "miss": 0} and report["inline"] == 0
    # control: no workers, so the same launches compile in-process, once per distinct variant
    assert report["control"] == {"hit": 0, "miss": 4} and report["control_inline"] == 4
    assert report["control_entries"] == 4


def test_jobs_carry_the_target_when_triton_leaves_it_out(report):
    assert report["targets"] == [{"backend": "cuda", "arch": 90, "warp_size": 32}] * 6


def test_a_warm_build_starts_no_workers(report):
    assert report["warm_cached"] == 4 and report["warm_started"] is False


def test_workers_follow_the_parents_triton_environment_when_it_changes_midway(report):
    """torch's inductor sets TRITON_PTXAS_PATH the first time it compiles, after the pool's workers started: their
    keys must follow the parent's, or every later kernel compiles again in the parent (the H200's INT8 builds)."""
    assert report["late_failed"] == {}
    assert report["late_parent"] == {"hit": 4, "miss": 0} and report["late_inline"] == 0
