"""Two replicas on two logical GPUs (ray.init(num_gpus=2)): distinct CUDA_VISIBLE_DEVICES; then one replica's
process is killed by its PID during a bounded load: Ray restarts it, later requests succeed, none is wrong."""

import os
import signal
import time

import numpy as np
import pytest
from ray import serve

from client_load import Load, cases, note
from conftest import spec, wait_until

NAME = "multi2"

pytestmark = pytest.mark.serve_load


def _placements(handle, want: int, tries: int = 60) -> dict:
    seen = {}
    for _ in range(tries):
        p = handle.placement.remote().result(timeout_s=30)
        seen[p["pid"]] = p
        if len(seen) >= want:
            break
    return seen


@pytest.fixture(scope="module")
def two_replicas(ray_cluster, ray_server, engine_path):
    from tensorforge.serve import app
    app.run_application(spec(engine_path, name=NAME, replicas=2, gpus_per_replica=1.0))
    yield serve.get_app_handle(NAME)
    serve.delete(NAME)


def test_two_replicas_get_distinct_devices(two_replicas):
    seen = _placements(two_replicas, 2)
    assert len(seen) == 2, f"only {len(seen)} replica answered"
    devices = sorted(p["cuda_visible_devices"] for p in seen.values())
    assert devices == ["0", "1"], devices


def test_killed_replica_restarts_and_nothing_is_answered_wrong(two_replicas, ray_server, engine, record_property):
    before = _placements(two_replicas, 2)
    victim = sorted(before)[0]
    work = cases(engine, 1200, np.random.default_rng(23))
    load = Load(ray_server.http, NAME, work, threads=16, timeout_s=150)
    killed_at = []

    import threading

    def killer():
        wait_until(lambda: len(load.records) >= 300, 60, "300 requests answered", step=0.05)
        killed_at.append(time.monotonic())
        os.kill(victim, signal.SIGKILL)
    t = threading.Thread(target=killer, daemon=True)
    t.start()
    report = load.run()
    t.join(5)
    assert killed_at, "the replica was never killed"
    failures = [r for r in load.records if r[2] == "failed"]
    record_property("failed_in_gap", len(failures))
    note(f"kill test: replica pid {victim} killed after 300 of 1200 requests; {len(failures)} failed in the gap, "
         f"{report['wrong']} wrong, {report['ok']} ok; {report['throughput_rps']:.0f} req/s; errors seen: "
         f"{sorted({r[3][:80] for r in failures})[:2]}")
    assert report["wrong"] == 0, report

    # Ray replaces the replica: two live replicas again, one of them a new process
    def restarted():
        now = _placements(two_replicas, 2, tries=20)
        return len(now) == 2 and victim not in now and now
    after = wait_until(restarted, 90, "the killed replica replaced", step=1.0)
    assert set(after) - set(before), "no new replica process"
    assert sorted(p["cuda_visible_devices"] for p in after.values()) == ["0", "1"]
    # and requests after recovery all succeed
    tail = Load(ray_server.http, NAME, cases(engine, 200, np.random.default_rng(29)), threads=8, timeout_s=60).run()
    assert tail["ok"] == 200, tail
