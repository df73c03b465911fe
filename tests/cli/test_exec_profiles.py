"""Issue 14.1 through `tensorforge exec` (CPU): several optimization profiles (`--profile=N`, `--useProfile`,
`--dumpOptimizationProfile`), and the trtexec flags that are now accepted (`--workspace`, `--profilingVerbosity`,
`--useCudaGraph` on a CPU, `--errorOnTimingCacheMiss`). Outputs are checked against onnxruntime."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))     # test_exec's helpers


import numpy as np
import pytest

from oracle import ort_run
from tensorforge.cli.trtexec_flags import parse_argv
from tensorforge.engine import from_bytes
from tensorforge.util.errors import UsageError
from test_exec import FAST, read_outputs, tfexec, tiny_model, write_inputs

TWO = ["--profile=0", "--minShapes=x:1x4,y:1x4", "--optShapes=x:2x4,y:2x4", "--maxShapes=x:4x4,y:4x4",
       "--profile=1", "--minShapes=x:8x4,y:8x4", "--optShapes=x:12x4,y:12x4", "--maxShapes=x:16x4,y:16x4"]


@pytest.fixture
def model(tmp_path):
    return tiny_model(tmp_path / "tiny.onnx")


def test_two_profiles_built_and_each_runs(tmp_path, model, capsys):
    engine, out = tmp_path / "p.engine", tmp_path / "o.json"
    rc, log, err = tfexec(capsys, f"--onnx={model}", *TWO, f"--saveEngine={engine}", "--skipInference",
                          "--dumpOptimizationProfile")
    assert rc == 0, err
    assert "Input build shape (profile 1): x=8x4+12x4+16x4" in log
    assert "Optimization profile 1: x min 8x4 opt 12x4 max 16x4" in log
    profiles = from_bytes(engine.read_bytes()).profiles
    assert [p["x"] for p in profiles] == [((1, 4), (2, 4), (4, 4)), ((8, 4), (12, 4), (16, 4))]
    for n, use in ((3, 0), (10, 1)):                     # 10 fits only profile 1, 3 only profile 0
        x, y = write_inputs(tmp_path, n, seed=n)
        np.save(tmp_path / "y.npy", y)
        rc, log, err = tfexec(capsys, f"--loadEngine={engine}", f"--shapes=x:{n}x4,y:{n}x4", f"--useProfile={use}",
                              f"--loadInputs=x:{tmp_path / 'x.npy'},y:{tmp_path / 'y.npy'}", f"--exportOutput={out}",
                              *FAST)
        assert rc == 0, err
        want = ort_run(model.read_bytes(), {"x": x, "y": y})
        got = read_outputs(out)
        np.testing.assert_allclose(got["out"], want["out"], rtol=1e-5, atol=1e-6)
    rc, _, err = tfexec(capsys, f"--loadEngine={engine}", "--shapes=x:10x4,y:10x4", "--useProfile=0", *FAST)
    assert rc != 0 and "outside profile 0" in err
    rc, _, err = tfexec(capsys, f"--loadEngine={engine}", "--shapes=x:6x4,y:6x4", *FAST)   # in no profile
    assert rc != 0 and "outside every optimization profile" in err


@pytest.mark.parametrize("argv,message", [
    (["--profile=1", "--optShapes=x:1x4"], "out of order"),
    (["--profile=0", "--optShapes=x:1x4", "--profile=2"], "out of order"),
    (["--profile=0", "--optShapes=x:1x4", "--profile=1", "--optShapes=x:2x4", "--optShapes=x:3x4"], "twice for profile 1"),
    (["--profile=x"], "integer"),
])
def test_profile_flag_errors(argv, message):
    with pytest.raises(UsageError, match=message):
        parse_argv(["--onnx=m.onnx", *argv])


def test_profile_completeness_checked(tmp_path, model, capsys):
    rc, _, err = tfexec(capsys, f"--onnx={model}", "--profile=0", "--optShapes=x:2x4,y:2x4", "--profile=1",
                        "--minShapes=x:1x4,y:1x4", "--optShapes=x:2x4,y:2x4", "--skipInference")
    assert rc == 2 and "(profile 1)" in err
    rc, _, err = tfexec(capsys, f"--onnx={model}", "--profile=0", "--optShapes=x:2x4,y:2x4", "--profile=1",
                        "--skipInference")
    assert rc == 2 and "--profile=1 has no shapes" in err


def test_accepted_compat_flags(tmp_path, model, capsys):
    rc, log, err = tfexec(capsys, f"--onnx={model}", "--shapes=x:2x4,y:2x4", "--workspace=64",
                          "--profilingVerbosity=detailed", "--dumpLayerInfo", "--useCudaGraph", "--device=cpu",
                          "--tacticSources=-CUDNN,+CUBLAS", "--maxAuxStreams=0", *FAST)
    assert rc == 0, err
    assert "--workspace is deprecated (trtexec 8.x); read as --memPoolSize=workspace:64M" in log
    assert "--useCudaGraph does not apply on cpu" in log and "--tacticSources has no effect here" in log
    assert "=== Layer Information" in log
    assert parse_argv(["--workspace=64"]).workspace_bytes == 64 << 20
    with pytest.raises(UsageError, match="set the same option"):
        parse_argv(["--workspace=64", "--memPoolSize=workspace:64M"])
    with pytest.raises(UsageError, match="layer_names_only, detailed, none"):
        parse_argv(["--profilingVerbosity=verbose"])


def test_threads_bare_is_trtexecs_switch_and_valued_is_ours(tmp_path, model, capsys):
    """trtexec 10's bare `--threads` (host threads driving streams) is accepted with the reason it changes nothing
    here; `--threads=N` stays torch's intra-op thread count; a second bare one is refused."""
    rc, log, err = tfexec(capsys, f"--onnx={model}", "--shapes=x:2x4,y:2x4", "--threads", "--threads=1",
                          "--infStreams=2", "--device=cpu", *FAST)
    assert rc == 0, err
    assert "--threads has no effect here: one host thread enqueues every --infStreams context" in log
    assert "CPU threads: 1 (--threads" in log
    opts = parse_argv(["--threads"])
    assert opts.compat == {"--threads": True} and opts.threads is None
    with pytest.raises(UsageError, match="given twice"):
        parse_argv(["--threads", "--threads"])


def test_error_on_timing_cache_miss(tmp_path, capsys):
    from test_exec_timing_cache import gemm_model
    model, cache = gemm_model(tmp_path / "g.onnx"), tmp_path / "cache.json"
    args = [f"--onnx={model}", f"--timingCacheFile={cache}", "--skipInference", "--device=cpu"]
    rc, _, err = tfexec(capsys, *args, "--errorOnTimingCacheMiss")
    assert rc != 0 and "not in the timing cache" in err and not cache.exists()
    assert tfexec(capsys, *args)[0] == 0 and cache.exists()          # fills the cache
    rc, _, err = tfexec(capsys, *args, "--errorOnTimingCacheMiss")    # now every timed layer hits
    assert rc == 0, err
