"""CPU thread control per context (issue 18; util/cpu_threads.py): ExecutionContext(threads=N), tfg.build /
tfg.load(threads=N) and `tensorforge exec --threads=N` run with torch's intra-op thread count at N and restore the
caller's afterwards (also on errors); contexts with different N never overlap; bad counts are one-line errors;
results match onnxruntime at every thread count."""

import threading
import time

import numpy as np
import pytest
import torch

import tensorforge as tfg
from oracle import ort_run
from rt_models import affine_relu
from tensorforge.cli.main import main
from tensorforge.engine import from_bytes
from tensorforge.runtime import ExecutionContext
from tensorforge.util.cpu_threads import cpu_threads
from tensorforge.util.errors import InputError, UsageError


@pytest.fixture
def engine():
    return from_bytes(tfg.build(affine_relu(), device="cpu", shapes={"x": ((1, 4), (3, 4), (8, 4))}).serialize())


@pytest.fixture
def outside():
    """Torch's thread count is 3 around each test (a value no context here asks for), restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    yield 3
    torch.set_num_threads(before)


def _seen(ctx, feed):
    """The thread counts torch reports inside the call, at every layer (execute's per-layer hook)."""
    seen = []
    ctx.execute(feed, hook=lambda i, phase: seen.append(torch.get_num_threads()))
    return set(seen)


@pytest.mark.parametrize("n", [1, 2])
def test_context_runs_with_its_threads_and_restores(engine, outside, n, monkeypatch):
    ctx = ExecutionContext(engine, "cpu", threads=n)
    x = torch.randn(3, 4)
    assert _seen(ctx, {"x": x}) == {n}
    assert torch.get_num_threads() == outside
    calls = []
    real = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", lambda k: (calls.append(k), real(k)))
    got = ctx.run({"x": x})["y"]
    assert calls == [n, outside] and torch.get_num_threads() == outside
    np.testing.assert_allclose(got.numpy(), ort_run(affine_relu(), {"x": x.numpy()})["y"], rtol=1e-6, atol=1e-6)


def test_no_threads_leaves_torch_alone(engine, outside, monkeypatch):
    ctx = ExecutionContext(engine, "cpu")
    monkeypatch.setattr(torch, "set_num_threads", lambda k: pytest.fail("threads=None must not set threads"))
    assert _seen(ctx, {"x": torch.randn(2, 4)}) == {outside}


def test_restored_when_the_call_fails(engine, outside):
    ctx = ExecutionContext(engine, "cpu", threads=1)
    with pytest.raises(InputError):
        ctx.run({"x": torch.randn(2, 4, dtype=torch.float64)})
    assert torch.get_num_threads() == outside


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_bad_counts_are_usage_errors(engine, bad):
    with pytest.raises(UsageError, match="not a thread count"):
        ExecutionContext(engine, "cpu", threads=bad)
    with pytest.raises(UsageError, match="not a thread count"):
        tfg.build(affine_relu(), device="cpu", threads=bad)


def test_different_counts_never_overlap(outside):
    """Two threads, N=1 and N=2, each holding its scope a while: each body sees only its own N."""
    seen, errors = {1: set(), 2: set()}, []

    def work(n):
        try:
            for _ in range(5):
                with cpu_threads(n):
                    for _ in range(3):
                        seen[n].add(torch.get_num_threads())
                        time.sleep(0.002)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    ts = [threading.Thread(target=work, args=(n,)) for n in (1, 2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors and seen == {1: {1}, 2: {2}}
    assert torch.get_num_threads() == outside


def test_nested_scope_in_one_thread(outside):
    with cpu_threads(2):
        with cpu_threads(1):
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
    assert torch.get_num_threads() == outside


def test_high_level_build_and_load(tmp_path, outside):
    eng = tfg.build(affine_relu(), device="cpu", threads=1, shapes={"x": ((1, 4), (2, 4), (4, 4))})
    assert eng.context.threads == 1
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    want = ort_run(affine_relu(), {"x": x})["y"]
    np.testing.assert_allclose(eng.run({"x": x})["y"], want, rtol=1e-6, atol=1e-6)
    eng.save(tmp_path / "m.engine")
    again = tfg.load(tmp_path / "m.engine", device="cpu", threads=2)
    assert again.context.threads == 2
    np.testing.assert_allclose(again.run({"x": x})["y"], want, rtol=1e-6, atol=1e-6)
    assert torch.get_num_threads() == outside


def test_exec_threads_flag(tmp_path, capsys, outside):
    model = tmp_path / "m.onnx"
    model.write_bytes(affine_relu())
    assert main(["exec", f"--onnx={model}", "--shapes=x:2x4", "--iterations=2", "--duration=0", "--warmUp=0",
                 "--threads=1", "--device=cpu"]) == 0
    out = capsys.readouterr().out
    assert "CPU threads: 1 (--threads" in out and "&&&& PASSED" in out
    assert torch.get_num_threads() == outside
    # bare `--threads` is trtexec's switch, accepted as a no-op (tests/cli/test_exec_profiles.py)
    for arg, says in (("--threads=0", "--threads"), ("--threads=two", "--threads")):
        rc = main(["exec", f"--onnx={model}", arg, "--device=cpu"])
        _, err = capsys.readouterr()
        lines = err.strip().splitlines()
        assert rc != 0 and len(lines) == 1 and says in lines[0] and "Traceback" not in err, err
