"""Issue 14.2: a CPU build with --timingCacheFile times its tactic choices (host clock) and writes the cache;
saves merge under a flock on `<cache>.lock`, so concurrent builders keep each other's entries."""

import os
import sys

import json
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(__file__))     # test_exec's helpers

from oracle import ort_run  # noqa: E402
from tensorforge.builder.timing_cache import TimingCache
from test_exec import FAST, read_outputs, tfexec

ROOT = Path(__file__).resolve().parents[2]


def gemm_model(path: Path, n_out: int = 16, seed: int = 0) -> Path:
    """y = relu(x @ W^T + b): Gemm has two CPU candidates (torch, oneDNN), so a CPU build with a cache times it."""
    rng = np.random.default_rng(seed)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits = [numpy_helper.from_array(rng.standard_normal((n_out, 32)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.standard_normal(n_out).astype(np.float32), "b")]
    nodes = [helper.make_node("Gemm", ["x", "W", "b"], ["g"], transB=1), helper.make_node("Relu", ["g"], ["y"])]
    m = helper.make_model(helper.make_graph(nodes, "gemm", [x], [y], initializer=inits),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def test_cpu_build_writes_and_reuses_the_cache(tmp_path, capsys):
    model, cache, out = gemm_model(tmp_path / "g.onnx"), tmp_path / "tc.json", tmp_path / "o.json"
    x = np.random.default_rng(1).standard_normal((2, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    args = [f"--onnx={model}", f"--timingCacheFile={cache}", "--device=cpu", f"--loadInputs=x:{tmp_path / 'x.npy'}",
            f"--exportOutput={out}", *FAST]
    rc, log, err = tfexec(capsys, *args)
    assert rc == 0, err
    data = json.loads(cache.read_text())
    (dev, entries), = data["devices"].items()
    assert dev.startswith("cpu:")
    gemm = [e for e in entries.values() if e["op"] in ("Gemm", "GemmEpilogue", "MatMulEpilogue")]
    assert gemm and all(len(e["times_ms"]) >= 2 and e["best"] in e["times_ms"] for e in gemm)
    np.testing.assert_allclose(read_outputs(out)["y"], ort_run(model.read_bytes(), {"x": x})["y"], rtol=1e-5, atol=1e-5)
    rc, log, err = tfexec(capsys, *args)
    assert rc == 0, err
    assert f"{len(gemm)} from the timing cache" in log


_SAVER = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from tensorforge.builder.timing_cache import TimingCache
    tag, path = sys.argv[1], sys.argv[2]
    for i in range(40):
        c = TimingCache()
        c.record("cpu:test", f"{{tag}}-{{i}}", {{"op": "Relu", "best": "t", "times_ms": {{"t": 1.0}}}})
        c.save(path)
""")


def test_concurrent_saves_merge_under_the_lock(tmp_path):
    """Two processes each save 40 new entries, one at a time, into one file: all 80 survive. (Without the lock a
    read-merge-write of one process overwrites entries the other added in between.)"""
    script, path = tmp_path / "saver.py", tmp_path / "cache.json"
    script.write_text(_SAVER.format(root=str(ROOT)))
    procs = [subprocess.Popen([sys.executable, str(script), tag, str(path)]) for tag in ("a", "b")]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    keys = set(TimingCache.load(path).devices["cpu:test"])
    assert keys == {f"{t}-{i}" for t in "ab" for i in range(40)}
    assert (tmp_path / "cache.json.lock").exists()


def test_two_concurrent_cpu_builds_merge(tmp_path):
    models = [gemm_model(tmp_path / f"m{k}.onnx", n_out=8 * (k + 1), seed=k) for k in range(2)]
    cache = tmp_path / "shared.json"
    procs = [subprocess.Popen([sys.executable, "-m", "tensorforge", "exec", f"--onnx={m}", f"--timingCacheFile={cache}",
                               "--skipInference", "--device=cpu"], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE) for m in models]
    assert [p.wait(timeout=300) for p in procs] == [0, 0], [p.stderr.read() for p in procs]
    entries = next(iter(json.loads(cache.read_text())["devices"].values())).values()
    widths = {e["signature"]["inputs"][1]["shape"][0] for e in entries if len(e["signature"]["inputs"]) > 1
              and e["signature"]["inputs"][1]}
    assert {8, 16} <= widths          # each build's Gemm (8 and 16 outputs) is in the merged file
