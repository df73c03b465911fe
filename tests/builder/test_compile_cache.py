"""The persistent Triton kernel cache (kernels/compile_cache.py), with real sm_90 compiles (Triton's NVIDIA
backend and ptxas run without a GPU, in a subprocess: TRITON_INTERPRET=1 is set for the test session). The
independent observation is the cache folder itself: how many entries Triton wrote, and the cubin bytes it
returns. A warm rebuild compiles nothing; a new source, a new config and a new device fingerprint each compile
once; a corrupt entry is removed and compiled again (without the check Triton returns the corrupt bytes).
Also: parallel precompile gives the same cubins as serial; config pruning against hand-computed cases."""

import json
import os
import subprocess
import sys

import pytest

from tensorforge.kernels.compile_cache import check, precompile, prune_tile_configs, write_index

SCRIPT = r'''
import json, os, sys, time
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from tensorforge.ir import Layer
from tensorforge.codegen import generate_pointwise
from tensorforge.kernels.generated import load_module, register_source
from tensorforge.kernels import compile_cache as cc

root = sys.argv[1]
TARGET = GPUTarget("cuda", 90, 32)

def kernel(op):
    steps = [{"op": op, "args": ["in0"], "attrs": {"approximate": "none"} if op == "Gelu" else {}}]
    layer = Layer("chain", "PointwiseChain", ["x"], ["y"], {"steps": steps, "outputs": ["s0"], "out_dtypes": ["float16"]})
    return load_module(register_source(generate_pointwise(layer, [torch.float16], 1)))["pointwise_kernel"]

SIG = {"in0": "*fp16", "out0": "*fp16", "n": "i32", "st0_0": "i32"}

def compile_(fn, block, warps=4):
    consts = {"FULL0": True, "NDIM": 1, "INT64": False, "BLOCK": block}
    src = ASTSource(fn=fn, signature={**SIG, **{c: "constexpr" for c in consts}}, constexprs=consts)
    return triton.compile(src, target=TARGET, options={"num_warps": warps})

def build(fp, jobs):
    with cc.for_build(fp, root) as state:
        cubins = [compile_(*j).asm["cubin"] for j in jobs]
    return state, cubins

out = {}
gelu, relu = kernel("Gelu"), kernel("Relu")
s, c0 = build("cuda:NVIDIA H200:sm_90", [(gelu, 1024)])
out["cold"] = s.compiled
s, c1 = build("cuda:NVIDIA H200:sm_90", [(gelu, 1024)])
out["warm"], out["warm_same_bytes"] = s.compiled, c1 == c0
out["new_source"] = build("cuda:NVIDIA H200:sm_90", [(gelu, 1024), (relu, 1024)])[0].compiled
out["new_config"] = build("cuda:NVIDIA H200:sm_90", [(gelu, 1024), (gelu, 2048)])[0].compiled
out["new_device"] = build("cuda:NVIDIA H100:sm_90", [(gelu, 1024)])[0].compiled
folder = cc.device_dir("cuda:NVIDIA H200:sm_90", root)
cubin = None
for d in sorted(os.listdir(folder)):
    for f in os.listdir(os.path.join(folder, d)) if os.path.isdir(os.path.join(folder, d)) else []:
        if f.endswith(".cubin") and open(os.path.join(folder, d, f), "rb").read() == c0[0]:
            cubin = os.path.join(folder, d, f)
with open(cubin, "r+b") as f:
    f.truncate(100)
os.environ["TRITON_CACHE_DIR"] = folder          # the control: Triton alone trusts the damaged file
out["unchecked_returns_corrupt"] = len(compile_(gelu, 1024).asm["cubin"]) == 100
del os.environ["TRITON_CACHE_DIR"]
s, c2 = build("cuda:NVIDIA H200:sm_90", [(gelu, 1024)])
out["corrupt_removed"], out["corrupt_recompiled"], out["corrupt_fixed"] = len(s.checked.removed), s.compiled, c2 == c0
# parallel precompile (fresh folder): same bytes as the serial compiles above, and the wall times
jobs = [(gelu, b, w) for b in (512, 1024, 2048, 4096) for w in (4, 8)]
with cc.for_build("cpu-parallel", root):
    t0 = time.perf_counter()
    par = cc.precompile([lambda j=j: compile_(*j).asm["cubin"] for j in jobs], workers=4)
    out["parallel_s"] = time.perf_counter() - t0
with cc.for_build("cpu-serial", root):
    t0 = time.perf_counter()
    ser = [compile_(*j).asm["cubin"] for j in jobs]
    out["serial_s"] = time.perf_counter() - t0
out["parallel_same_bytes"] = par == ser
out["parallel_compiled"] = len(jobs)
# worker processes: a job as Triton's jit_cache_hook describes it, compiled in a spawned worker; the parent's own
# compile of the same kernel then loads the worker's entry (no new entry, same bytes)
from triton.runtime.jit import serialize_specialization_data
from triton.backends.nvidia.compiler import CUDABackend
consts = {(4,): True, (5,): 1, (6,): False, (7,): 512}
sig = {**SIG, "FULL0": "constexpr", "NDIM": "constexpr", "INT64": "constexpr", "BLOCK": "constexpr"}
opts = CUDABackend(TARGET).parse_options({"num_warps": 2})
spec = serialize_specialization_data("pointwise_kernel", sig, consts, {}, opts, "k", TARGET)
gen_text = [t for k, t in __import__("tensorforge.kernels.generated", fromlist=["_SOURCES"])._SOURCES.items()
            if "def gelu_erf_lo" in t][0]
job = ("tensorforge_kernel_x", "pointwise_kernel", gen_text, spec)
with cc.for_build("cuda:workers", root, workers=2) as st:
    out["worker_ok"] = st.pool.compile_all([job, job])          # the duplicate is compiled once
    n_after_worker = len(cc._entries(st.folder))
    src = ASTSource(fn=gelu, signature=sig, constexprs=consts)
    k = triton.compile(src, target=TARGET, options={"num_warps": 2})
    out["parent_new_entries"] = len(cc._entries(st.folder)) - n_after_worker
    out["worker_entries"] = n_after_worker
bad = (job[0], job[1], job[2], spec.replace('"num_warps": 2', '"num_warps": 3'))   # not a power of two
with cc.for_build("cuda:workers-bad", root, workers=1) as st:
    out["bad_ok"] = st.pool.compile_all([bad])
    out["bad_failed"] = list(st.pool.failed.values())
print("REPORT" + json.dumps(out))
'''


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    pytest.importorskip("triton.backends.nvidia", reason="Triton's NVIDIA backend is not installed")
    root = str(tmp_path_factory.mktemp("tfgcache"))
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TRITON_CACHE_DIR")}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, root], capture_output=True, text=True, env=env, timeout=500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.split("REPORT", 1)[1])


def test_warm_rebuild_compiles_nothing(report):
    assert report["cold"] == 1 and report["warm"] == 0 and report["warm_same_bytes"]


def test_new_source_config_and_device_each_compile_once(report):
    assert report["new_source"] == 1 and report["new_config"] == 1 and report["new_device"] == 1


def test_corrupt_entry_is_removed_and_compiled_again(report):
    assert report["unchecked_returns_corrupt"]          # Triton alone would hand the damaged cubin on
    assert report["corrupt_removed"] == 1 and report["corrupt_recompiled"] == 1 and report["corrupt_fixed"]


def test_parallel_precompile_matches_serial(report):
    assert report["parallel_same_bytes"]
    print(f"8 configs: parallel {report['parallel_s']:.2f} s, serial {report['serial_s']:.2f} s")


def test_worker_processes_fill_the_cache_the_parent_loads(report):
    assert report["worker_ok"] == 1 and report["worker_entries"] == 1
    assert report["parent_new_entries"] == 0            # the launching process found the worker's entry
    assert report["bad_ok"] == 0 and len(report["bad_failed"]) == 1


def _entry(folder, name, data: bytes, complete=True):
    d = folder / name
    d.mkdir()
    (d / "k.cubin").write_bytes(data)
    if complete:                                            # Triton writes the group file last
        (d / "__grp__k.json").write_text(json.dumps({"child_paths": {"k.cubin": str(d / "k.cubin")}}))


def test_check_drops_unindexed_and_changed_entries(tmp_path):
    for name in ("a", "b", "c"):
        _entry(tmp_path, name, name.encode() * 10)
    _entry(tmp_path, "half", b"h", complete=False)          # still being written: not indexed
    assert write_index(str(tmp_path)) == 3
    (tmp_path / "b" / "k.cubin").write_bytes(b"xx")        # changed after it was indexed
    _entry(tmp_path, "d", b"d")                             # written by a build that never indexed it
    kept = check(str(tmp_path), only_indexed=True)          # another build is running: unindexed ones stay
    assert kept.kept == 2 and sorted(kept.removed) == ["b"] and (tmp_path / "d").exists()
    res = check(str(tmp_path))
    assert res.kept == 2 and sorted(res.removed) == ["d", "half"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["a", "c"]
    (tmp_path / "index.json").write_text("{not json")        # an unreadable index trusts nothing
    assert check(str(tmp_path)).kept == 0 and not (tmp_path / "a").exists()


def test_a_running_build_elsewhere_keeps_its_unindexed_entries(tmp_path):
    """Another process's build holds the shared lock: this build must not delete that build's new entries."""
    from pathlib import Path

    from tensorforge.kernels.compile_cache import device_dir, for_build
    folder = device_dir("cuda:X:sm_90", str(tmp_path))
    os.makedirs(folder)
    _entry(Path(folder), "theirs", b"t")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_SH); "
        "print('locked', flush=True); time.sleep(30)"), os.path.join(folder, ".lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with for_build("cuda:X:sm_90", str(tmp_path)) as state:
            assert state.checked.removed == {} and os.path.isdir(os.path.join(folder, "theirs"))
    finally:
        holder.kill()
        holder.wait()
    with for_build("cuda:X:sm_90", str(tmp_path)) as state:        # alone now; "theirs" was indexed on exit above
        assert state.checked.kept == 1


def test_an_unwritable_cache_root_leaves_triton_alone(tmp_path):
    from tensorforge.kernels.compile_cache import for_build
    root = tmp_path / "ro"
    root.write_text("a file, not a folder")
    before = os.environ.get("TRITON_CACHE_DIR")
    with for_build("cuda:X:sm_90", str(root)) as state:
        assert state is None and os.environ.get("TRITON_CACHE_DIR") == before     # Triton's own cache, untouched


def test_precompile_returns_exceptions_in_order():
    res = precompile([lambda: 1, lambda: 1 / 0, lambda: 3], workers=2)
    assert res[0] == 1 and isinstance(res[1], ZeroDivisionError) and res[2] == 3


def test_prune_tile_configs_hand_cases():
    a = {"BM": 128, "BN": 64, "BK": 32, "stages": 3, "warps": 4}
    b = {"BM": 64, "BN": 64, "BK": 32, "stages": 3, "warps": 4}
    c = {"BM": 16, "BN": 64, "BK": 32, "stages": 3, "warps": 8}
    # m = 16: b covers the 16 rows with a 64-row tile, a only adds masked rows (same warps, stages, BN, BK);
    # c is smaller still but has other warps, so it dominates nothing
    kept, dropped = prune_tile_configs([a, b, c], 16, 1024, 1024, 2)
    assert kept == [b, c] and list(dropped) == ["BK=32,BM=128,BN=64,stages=3,warps=4"]
    assert prune_tile_configs([a, b, c], 100, 1024, 1024, 2) == ([a, b, c], {})   # 100 rows pad to 128 > 64
    # shared memory, fp32: a 3·(128·32 + 32·64)·4 = 73728 B, b 49152 B, c 30720 B against 60000 B
    kept, dropped = prune_tile_configs([a, b, c], 4096, 4096, 4096, 4, smem_limit=60000)
    assert kept == [b, c] and "73728 B" in dropped["BK=32,BM=128,BN=64,stages=3,warps=4"]
    assert prune_tile_configs([a, b, c], 4096, 4096, 4096, 4, smem_limit=1000) == ([a, b, c], {})   # never all


def test_progress_names_each_layer_before_it_is_timed(monkeypatch):
    """CPU build with a timing cache times its two-candidate Relus; the progress object hears `timing(layer, n)`
    before the layer's `__call__` (exec's rich bar shows that name), and only for timed layers."""
    import tensorforge as tfg
    from tensorforge.builder import BuilderConfig, tactics
    from tensorforge.kernels import registry
    import importlib.util
    spec = importlib.util.spec_from_file_location("_tactics_helpers", os.path.join(os.path.dirname(__file__),
                                                                                   "test_tactics.py"))
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    SHAPES, FakeTimer, _relu_tactic, relu_model = helpers.SHAPES, helpers.FakeTimer, helpers._relu_tactic, helpers.relu_model

    monkeypatch.setitem(registry._TACTICS, "Relu", [_relu_tactic("fast"), _relu_tactic("slow")])
    events = []

    class Progress:
        def begin(self, n):
            events.append(("begin", n))

        def timing(self, layer, n):
            events.append(("timing", layer.name, n))

        def __call__(self, layer):
            events.append(("done", layer.name))
    timer = FakeTimer({"fast": 0.1, "slow": 0.5, "torch_ref": 0.3})
    config = BuilderConfig(device="cpu", profiles=tfg.api.high_level._as_profile(SHAPES), optimization_level=1)
    from tensorforge.builder import builder as builder_module
    prog = Progress()
    monkeypatch.setattr(builder_module, "choose_tactics",
                        lambda *a, **k: tactics.choose_tactics(*a, **{**k, "timer": timer, "progress": prog}))
    tfg.build(relu_model(), config=config, device="cpu")
    timed = [e for e in events if e[0] == "timing"]
    # the opt point, then the range profile's min and max points (builder/point_tactics.py), each pass announced
    assert [e[1] for e in timed] == ["r1", "r2", "r3", "r4"] * 3 and all(e[2] == 5 for e in timed)   # 2 × 2 + ref
    assert [e for e in events if e[0] == "begin"] == [("begin", 5)] * 3
    for name in ("r1", "r4"):
        assert events.index(("timing", name, 5)) + 1 == events.index(("done", name))
    assert not any(e[0] == "timing" and e[1] == "cat" for e in events)


def test_gemm_configs_are_pruned_before_compiling():
    """tactics._prune on the Triton GEMM's real configs. Hand check, 16 × 1024 × 1024: 128×64×32 (G 8, 4 stages,
    4 warps) is dominated by 64×64×32 with the same G/stages/warps (64 rows still cover 16); 64×128×32 is not
    (64 columns do not cover 1024), nor any other (they differ in G, stages or warps). 8192 × 4096 × 64 prunes
    nothing. fp32 on a 227 KiB device drops only 128×256×64 × 3 stages (3·(128·64 + 64·256)·4 = 294912 B)."""
    import torch

    from tensorforge.builder import tactics
    from tensorforge.ir import Layer
    from tensorforge.kernels.registry import Tactic
    from tensorforge.kernels.triton_gemm import CONFIGS

    tac = Tactic("MatMulEpilogue", "triton_gemm", lambda layer, device: None, None, CONFIGS, 1)
    found = [(tac, c) for c in CONFIGS]
    layer = Layer("g", "MatMulEpilogue", ["a", "b"], ["y"], {})
    a, b = torch.zeros(16, 1024, dtype=torch.float16), torch.zeros(1024, 1024, dtype=torch.float16)
    pruned = tactics._prune(layer, found, [a, b], torch.device("cpu"))
    assert list(pruned) == [tac.id(CONFIGS[1])] and "BM=64,BN=64" in pruned[tac.id(CONFIGS[1])]
    layer_t = Layer("g", "MatMulEpilogue", ["a", "b"], ["y"], {"trans_b": 1})
    assert tactics._prune(layer_t, found, [torch.zeros(8192, 64), torch.zeros(4096, 64)], torch.device("cpu")) == {}
    kept, dropped = prune_tile_configs(CONFIGS, 4096, 4096, 4096, 4, smem_limit=232448)
    assert [c for c in CONFIGS if c not in kept] == [CONFIGS[4]] and "294912 B" in next(iter(dropped.values()))
