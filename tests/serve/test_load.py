"""Bounded load on the Ray Serve application: ≥ 2,000 requests from 16 threads (one HTTP client each), every
answer compared with engine.run; batching must show in Ray's Prometheus metrics and in the statistics extension.
Throughput and p50/p99 go to the terminal summary (and the test properties)."""

import re
import time
import urllib.request

import numpy as np
import pytest
import tritonclient.http as httpclient

from client_load import Load, cases, note

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
    note(f"ray load, 16 threads x 1 HTTP client, 1-3 rows/request: {report['requests']} requests in "
         f"{report['wall_s']:.1f} s = {report['throughput_rps']:.0f} req/s, p50 {report['p50_ms']:.1f} ms, "
         f"p99 {report['p99_ms']:.1f} ms, {report['wrong']} wrong, {report['failed']} failed")
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
    note(f"ray load: {total:.0f} engine runs, {batched:.0f} of more than 1 row (Prometheus); rows per run seen: "
         f"{sorted(sizes)}")
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


def test_per_request_overhead(ray_server, triton_server, engine):
    """Sequential single-client latency of one 1-row request: engine.run in this process vs. over each wire
    (docs/serving.md quotes these); every answer compared."""
    import tritonclient.grpc as grpcclient

    from client_load import infer_inputs
    work = cases(engine, 200, np.random.default_rng(31), rows=(1,))
    t0 = time.perf_counter()
    for feed, _ in work:
        engine.run(feed)
    local_ms = (time.perf_counter() - t0) / len(work) * 1e3
    rows = [f"engine.run in process: {local_ms:.2f} ms"]
    for server in (ray_server, triton_server):
        http = httpclient.InferenceServerClient(server.http)
        grpc = grpcclient.InferenceServerClient(server.grpc)
        for wire in ("http-binary", "grpc"):
            lat = []
            for feed, expected in work:
                t = time.perf_counter()
                if wire == "grpc":
                    ins = []
                    for name, arr in feed.items():
                        g = grpcclient.InferInput(name, list(arr.shape), infer_inputs({name: arr})[0].datatype())
                        g.set_data_from_numpy(arr)
                        ins.append(g)
                    result = grpc.infer(server.model, ins, headers=server.headers)
                else:
                    result = http.infer(server.model, infer_inputs(feed))
                lat.append(time.perf_counter() - t)
                np.testing.assert_array_equal(result.as_numpy("ii"), expected["ii"])
            p50 = float(np.percentile(np.array(lat) * 1e3, 50))
            rows.append(f"{server.kind} {wire}: p50 {p50:.2f} ms (+{p50 - local_ms:.2f} ms)")
    note("one 1-row request, one client, sequential: " + "; ".join(rows))
