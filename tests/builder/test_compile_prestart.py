"""Pre-started compile workers (compile_cache.prestart): a build's Triton workers spawn before its passes run and
its tactic choice takes them over; a pool nobody takes is released; a warm build's idle pool does not wait."""

import json
import os
from concurrent.futures import wait

from tensorforge.kernels import compile_cache as cc
from tensorforge.kernels import compile_pool


def test_the_build_takes_over_the_prestarted_pool(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(compile_pool.CompilePool, "prestart", lambda self: started.append(self) or None)
    key = cc.prestart("cuda:prestart-test", 2, root=str(tmp_path))
    assert key == (cc.device_dir("cuda:prestart-test", str(tmp_path)), 2) and len(started) == 1
    assert cc.prestart("cuda:prestart-test", 2, root=str(tmp_path)) is None        # one pool per key
    with cc.for_build("cuda:prestart-test", str(tmp_path), workers=2) as state:
        assert state.pool is started[0]
    assert key not in cc._PRESTARTED
    cc.release(key)                                            # nothing left to release: no error
    with cc.for_build("cuda:prestart-test", str(tmp_path), workers=2) as state:    # not pre-started: a new pool
        assert state.pool is not started[0]


def test_a_warm_cache_starts_no_workers_early(tmp_path, monkeypatch):
    """Below PRESTART_BELOW indexed entries the workers start early; at it, none (the pool starts lazily)."""
    started = []
    monkeypatch.setattr(compile_pool.CompilePool, "prestart", lambda self: started.append(self))
    folder = cc.device_dir("cuda:warm", str(tmp_path))
    os.makedirs(folder)
    started_for = []
    for n in (cc.PRESTART_BELOW - 1, cc.PRESTART_BELOW):
        with open(os.path.join(folder, cc.INDEX), "w") as f:
            json.dump({f"entry{i}": {} for i in range(n)}, f)
        key = cc.prestart("cuda:warm", 2, root=str(tmp_path))
        started_for.append(key is not None)
        cc.release(key)
    assert started_for == [True, False] and len(started) == 1


def test_an_untaken_pool_is_released(tmp_path, monkeypatch):
    closed = []
    monkeypatch.setattr(compile_pool.CompilePool, "prestart", lambda self: None)
    monkeypatch.setattr(compile_pool.CompilePool, "close", lambda self: closed.append(self))
    key = cc.prestart("cuda:released", 1, root=str(tmp_path))
    pool = cc._PRESTARTED[key]
    cc.release(key)
    assert closed == [pool] and key not in cc._PRESTARTED
    assert cc.prestart("cuda:none", 0, root=str(tmp_path)) is None


def test_a_pool_that_cannot_spawn_is_not_kept(tmp_path, monkeypatch):
    """Pre-starting is an optimisation: a spawn that fails leaves nothing behind, and the build goes on."""
    def no_processes(self):
        raise OSError("Resource temporarily unavailable")
    monkeypatch.setattr(compile_pool.CompilePool, "prestart", no_processes)
    assert cc.prestart("cuda:nospawn", 2, root=str(tmp_path)) is None
    assert not any(k[0] == cc.device_dir("cuda:nospawn", str(tmp_path)) for k in cc._PRESTARTED)


def test_a_prestarted_worker_really_starts(tmp_path):
    """One real spawned worker runs its warm-up imports; closing the idle pool returns without a job."""
    pool = compile_pool.CompilePool(1, str(tmp_path))
    fut = pool._spawn_submit(compile_pool._warm_worker)
    pool.prestarted = True
    done, _ = wait([fut], timeout=240)
    assert fut in done and fut.exception() is None
    pool.close()


def test_prestart_can_be_turned_off_and_a_bad_value_is_refused(tmp_path, monkeypatch):
    import pytest
    from tensorforge.util.errors import UsageError
    started = []
    monkeypatch.setattr(compile_pool.CompilePool, "prestart", lambda self: started.append(self))
    monkeypatch.setenv("TFG_COMPILE_PRESTART", "0")
    assert cc.prestart("cuda:off", 2, root=str(tmp_path)) is None and started == []
    monkeypatch.setenv("TFG_COMPILE_PRESTART", "yes")
    with pytest.raises(UsageError, match="TFG_COMPILE_PRESTART='yes'"):
        cc.prestart("cuda:off", 2, root=str(tmp_path))
    monkeypatch.setenv("TFG_COMPILE_PRESTART", "1")
    key = cc.prestart("cuda:off", 2, root=str(tmp_path))
    assert key is not None and len(started) == 1
    cc.release(key)
