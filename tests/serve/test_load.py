"""Bounded load on the Ray Serve application: ≥ 2,000 requests from 16 threads (one HTTP client each), every
answer compared with engine.run; batching must show in Ray's Prometheus metrics and in the statistics extension.
Throughput and p50/p99 are printed (and kept as test properties)."""

import re
import sys
import time
import urllib.request

import numpy as np
import pytest
import tritonclient.http as httpclient

from client_load import Load, cases

pytestmark = pytest.mark.serve_load


def _prometheus(port) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()


def _batched_runs(text: str, model: str) -> tuple[float, float]:
    """(runs of more than 1 row, all runs) from the tensorforge_batch_rows histogram."""
    total = one = 0.0
    for line in text.splitlines():
        if not line.startswith("ray_tensorforge_batch_rows") or f'model="{model}"' not in line:
            continue
        value = float(line.rsplit(" ", 1)[1])
        if line.startswith("ray_tensorforge_batch_rows_count"):
            total += value
        elif line.startswith("ray_tensorforge_batch_rows_bucket") and 'le="1.5"' in line:
            one += value
    return total - one, total


def test_load_2000_requests_16_threads(ray_server, ray_cluster, engine, record_property):
    work = cases(engine, 2000, np.random.default_rng(11))
    report = Load(ray_server.http, ray_server.model, work, threads=16, timeout_s=120).run()
    for k, v in report.items():
        record_property(k, v)
    print(f"\nserve load (ray, 16 threads, rows 1-3): {report}", file=sys.__stderr__)
    assert report["requests"] == 2000 and report["wrong"] == 0 and report["failed"] == 0, report

    stats = httpclient.InferenceServerClient(ray_server.http).get_inference_statistics(ray_server.model)
    sizes = {b["batch_size"]: b["compute_infer"]["count"] for b in stats["model_stats"][0]["batch_stats"]}
    assert any(size > 3 for size in sizes), f"no batch larger than one request in the statistics: {sizes}"

    deadline = time.monotonic() + 40
    batched = total = 0.0
    while time.monotonic() < deadline:
        batched, total = _batched_runs(_prometheus(ray_cluster["metrics"]), ray_server.model)
        if batched > 0:
            break
        time.sleep(1)
    record_property("engine_runs", total)
    record_property("engine_runs_over_1_row", batched)
    print(f"engine runs {total:.0f}, of which {batched:.0f} with more than 1 row; batch sizes {sorted(sizes)}",
          file=sys.__stderr__)
    assert batched > 0, f"Prometheus shows no batch of more than 1 row ({total} runs)"


def test_metrics_count_requests(ray_server, ray_cluster):
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        text = _prometheus(ray_cluster["metrics"])
        counts = [float(m.group(1)) for m in re.finditer(
            r'^ray_tensorforge_requests_total\{[^}]*code="200"[^}]*model="multi"[^}]*\} (\S+)', text, re.M)]
        if counts and sum(counts) > 0:
            assert "ray_tensorforge_engine_ms_bucket" in text and "ray_tensorforge_queue_ms_bucket" in text
            return
        time.sleep(1)
    pytest.fail("ray_tensorforge_requests_total never appeared")
