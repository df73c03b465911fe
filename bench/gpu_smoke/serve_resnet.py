"""GPU smoke of serving: resnet50 fp16 (batch 1..16) through one Ray Serve replica on the GPU, against the same
engine called in a loop in one process. Needs ray[serve] 2.60 on the device (`pip install 'tensorforge[serve]'`);
without it the Ray checks FAIL with that reason and only the in-process numbers are printed.
One PASS/FAIL line per check; exit 1 on any FAIL.   PYTHONPATH=. python3 bench/gpu_smoke/serve_resnet.py  (≈ 60–90 s)
`--cpu-dry-run`: the same steps with bench/zoo's tiny_cnn on the CPU (checks the script itself, no GPU needed).
"""

import http.client
import json
import os
import socket
import sys
import tempfile
import threading
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

FAILS = []


def line(ok, name, msg):
    print(f"{'PASS' if ok else 'FAIL'} {name} {msg}", flush=True)
    if not ok:
        FAILS.append(name)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def body_of(x: np.ndarray):
    from tensorforge.serve.datatypes import v2_of_numpy
    head = json.dumps({"inputs": [{"name": "input", "datatype": v2_of_numpy(x.dtype), "shape": list(x.shape),
                                   "parameters": {"binary_data_size": x.nbytes}}],
                       "parameters": {"binary_data_output": True}}).encode()
    return head + x.tobytes(), len(head)


def client_load(port, name, x, want, threads=16, seconds=10.0):
    body, n = body_of(x)
    lat, bad, errors = [], [], []
    stop = time.monotonic() + seconds

    def worker():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            try:
                conn.request("POST", f"/v2/models/{name}/infer", body=body,
                             headers={"Inference-Header-Content-Length": str(n)})
                r = conn.getresponse()
                data = r.read()
                k = int(r.getheader("Inference-Header-Content-Length"))
                out = json.loads(data[:k])["outputs"][0]
                y = np.frombuffer(data[k:], {"FP16": np.float16, "FP32": np.float32}[out["datatype"]])
                y = y.reshape(want.shape)
                lat.append(time.perf_counter() - t0)
                if not np.allclose(y.astype(np.float32), want, atol=0.05, rtol=0.05):
                    bad.append(float(np.abs(y.astype(np.float32) - want).max()))
            except Exception as e:  # noqa: BLE001
                errors.append(str(e)[:100])
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    ts = [threading.Thread(target=worker) for _ in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    return len(lat) / wall, np.percentile(np.array(lat) * 1e3, [50, 99]), bad, errors


def main() -> int:
    import tensorforge as tfg
    import zoo
    dry = "--cpu-dry-run" in sys.argv
    model_name, device, image = ("tiny_cnn", "cpu", 32) if dry else ("resnet50", "cuda", 224)
    tmp = tempfile.mkdtemp(prefix="serve-smoke-")
    path = os.path.join(tmp, f"{model_name}.engine")
    t0 = time.perf_counter()
    onnx_bytes, _ = zoo.export(model_name, zoo.make(model_name).eval())
    engine = tfg.build(onnx_bytes, fp16=not dry, device=device,
                       shapes={"input": tuple((b, 3, image, image) for b in (1, 8, 16))})
    engine.save(path)
    line(True, f"build_{model_name}_{'fp32' if dry else 'fp16'}", f"{time.perf_counter() - t0:.1f} s")
    name_in = engine.input_names[0]
    in_dtype = {torch.float16: np.float16, torch.float32: np.float32}[engine.data.inputs[0].dtype]
    x = np.random.default_rng(0).standard_normal((1, 3, image, image)).astype(in_dtype)
    want = engine.run({name_in: x})[engine.output_names[0]].astype(np.float32)
    xs = torch.from_numpy(x).to(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(20):
        engine.run({name_in: xs})
    sync()
    t0 = time.perf_counter()
    n = 300
    for _ in range(n):
        engine.run({name_in: xs})
    sync()
    loop_rps = n / (time.perf_counter() - t0)
    line(True, "in_process_loop_batch1", f"{loop_rps:.0f} req/s ({1e3 / loop_rps:.2f} ms/request)")
    try:
        import ray
        from ray import serve
    except ImportError as e:
        line(False, "ray_serve_available", f"ray[serve] not installed on this machine ({e})")
        return 1
    from tensorforge.serve import app
    os.environ.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    http_port, grpc_port = free_port(), free_port()
    t0 = time.perf_counter()
    app.start(http_port, grpc_port, ray_init={"num_gpus": 0 if dry else 1, "include_dashboard": False,
                                               "log_to_driver": False,
                                               "_temp_dir": tempfile.mkdtemp(prefix="r", dir="/tmp")})
    try:
        app.run_application(app.AppSpec(path, name=model_name, gpus_per_replica=0.0 if dry else 1.0,
                                        batch_wait_ms=2.0), root=True)
        line(True, "ray_app_healthy", f"{time.perf_counter() - t0:.1f} s to start Ray + warm the replica")
        place = serve.get_app_handle(model_name).placement.remote().result(timeout_s=30)
        on_gpu = place["device"].startswith("cuda") and place["contexts"] == 2
        line(on_gpu or dry, "replica_on_gpu", json.dumps(place))
        rps, (p50, p99), bad, errors = client_load(http_port, model_name, x, want, seconds=5.0 if dry else 10.0)
        line(not bad and not errors, "ray_answers_match_engine_run",
             f"{len(bad)} off (worst {max(bad, default=0):.3f}), {len(errors)} errors {errors[:2]}")
        line(True, "ray_throughput_16_clients", f"{rps:.0f} req/s, p50 {p50:.2f} ms, p99 {p99:.2f} ms; "
             f"{rps / loop_rps:.2f}x the in-process batch-1 loop")
        stats = json.loads(urllib_get(http_port, f"/v2/models/{model_name}/stats"))
        sizes = sorted(b["batch_size"] for b in stats["model_stats"][0]["batch_stats"])
        line(any(s > 1 for s in sizes), "ray_batches_formed", f"batch sizes run: {sizes}")
    finally:
        serve.shutdown()
        ray.shutdown()
    return 1 if FAILS else 0


def urllib_get(port, route):
    import urllib.request
    return urllib.request.urlopen(f"http://127.0.0.1:{port}{route}", timeout=10).read()


if __name__ == "__main__":
    sys.exit(main())
