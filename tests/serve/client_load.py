"""A bounded closed-loop load: `threads` workers, one tritonclient HTTP client each, every answer compared."""

import threading
import time

import numpy as np
import tritonclient.http as httpclient

NOTES: list[str] = []       # measured numbers, printed in pytest's terminal summary (conftest.py)


def note(line: str) -> None:
    NOTES.append(line)


V2 = {np.dtype(np.float32): "FP32", np.dtype(np.float16): "FP16", np.dtype(np.int64): "INT64", np.dtype(bool): "BOOL"}


def infer_inputs(feed):
    out = []
    for name, arr in feed.items():
        t = httpclient.InferInput(name, list(arr.shape), V2[arr.dtype])
        t.set_data_from_numpy(arr, binary_data=True)
        out.append(t)
    return out


class Load:
    """Runs `cases` (feed, expected) round-robin over `threads` threads; records per request (start, latency, ok,
    error). `on_progress(done)` is called by worker 0 after each request (the kill test uses it)."""

    def __init__(self, url, model, cases, threads=16, timeout_s=60.0):
        self.url, self.model, self.cases, self.threads, self.timeout_s = url, model, cases, threads, timeout_s
        self.records: list[tuple[float, float, str, str]] = []   # (start, seconds, "ok"|"wrong"|"failed", error)
        self.lock = threading.Lock()
        self.next = 0

    def _take(self):
        with self.lock:
            if self.next >= len(self.cases):
                return None
            self.next += 1
            return self.next - 1

    def _worker(self, deadline):
        client = httpclient.InferenceServerClient(self.url, network_timeout=30, connection_timeout=30)
        outputs = None
        while time.monotonic() < deadline:
            k = self._take()
            if k is None:
                return
            feed, expected = self.cases[k]
            if outputs is None:
                outputs = [httpclient.InferRequestedOutput(n, binary_data=True) for n in expected]
            t0 = time.monotonic()
            try:
                result = client.infer(self.model, infer_inputs(feed), outputs=outputs)
                ok = all(np.array_equal(result.as_numpy(n), v) and result.as_numpy(n).dtype == v.dtype
                         for n, v in expected.items())
                rec = (t0, time.monotonic() - t0, "ok" if ok else "wrong", "")
            except Exception as e:  # noqa: BLE001 - a failed request is counted, not fatal
                rec = (t0, time.monotonic() - t0, "failed", str(e)[:200])
                client.close()
                client = httpclient.InferenceServerClient(self.url, network_timeout=30, connection_timeout=30)
            with self.lock:
                self.records.append(rec)

    def run(self) -> dict:
        deadline = time.monotonic() + self.timeout_s
        workers = [threading.Thread(target=self._worker, args=(deadline,), daemon=True) for _ in range(self.threads)]
        t0 = time.monotonic()
        for w in workers:
            w.start()
        for w in workers:
            w.join(self.timeout_s + 30)
        wall = time.monotonic() - t0
        lat = np.array([r[1] for r in self.records if r[2] == "ok"]) * 1e3
        return {"requests": len(self.records), "ok": sum(r[2] == "ok" for r in self.records),
                "wrong": sum(r[2] == "wrong" for r in self.records),
                "failed": sum(r[2] == "failed" for r in self.records), "wall_s": wall,
                "throughput_rps": len(self.records) / wall if wall else 0.0,
                "p50_ms": float(np.percentile(lat, 50)) if lat.size else None,
                "p99_ms": float(np.percentile(lat, 99)) if lat.size else None}


def cases(engine, n, rng, rows=(1, 2, 3)):
    from serve_models import random_inputs
    out = []
    for k in range(n):
        feed = random_inputs(int(rows[k % len(rows)]), rng)
        out.append((feed, engine.run(feed)))
    return out
