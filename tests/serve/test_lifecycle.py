"""Applications coming and going on the session's Ray cluster: a broken engine never goes healthy (and says why),
`reconfigure` swaps an engine in place (same process, the new engine's answers), overload is shed with 503."""

import concurrent.futures
import http.client
import json

import numpy as np
import pytest
import tritonclient.http as httpclient
from ray import serve

from client_load import infer_inputs
from conftest import spec
from serve_models import build_engine, random_inputs

from tensorforge.util.errors import UsageError


def _status(name):
    return serve.status().applications.get(name)


def test_broken_engine_never_goes_healthy(ray_cluster, ray_server, tmp_path):
    from tensorforge.serve import app
    broken = tmp_path / "broken.engine"
    broken.write_bytes(b"TFENGINE" + b"\0" * 40)
    with pytest.raises(UsageError) as info:
        app.run_application(spec(broken, name="broken", load_retries=1))
    message = str(info.value)
    # the replica's own reason (EngineModel → the engine loader), not just "failed"
    assert "cannot load engine" in message and "not a tensorforge engine" in message, message
    assert _status("broken") is None
    assert httpclient.InferenceServerClient(ray_server.http).is_model_ready(ray_server.model)


def test_reconfigure_swaps_the_engine_in_place(ray_cluster, ray_server, tmp_path):
    from tensorforge.serve import app
    first, second = tmp_path / "k2.engine", tmp_path / "k3.engine"
    e2, e3 = build_engine(first, k=2.0), build_engine(second, k=3.0)
    app.run_application(spec(first, name="swap"))
    try:
        handle = serve.get_app_handle("swap")
        pid = handle.placement.remote().result(timeout_s=30)["pid"]
        client = httpclient.InferenceServerClient(ray_server.http)
        feed = random_inputs(3, np.random.default_rng(1))
        y = client.infer("swap", infer_inputs(feed)).as_numpy("y")
        np.testing.assert_array_equal(y, e2.run(feed)["y"])
        app.run_application(spec(second, name="swap"))          # only user_config changed: reconfigure
        after = handle.placement.remote().result(timeout_s=30)
        assert after["pid"] == pid and after["engine"] == str(second)
        y = client.infer("swap", infer_inputs(feed)).as_numpy("y")
        np.testing.assert_array_equal(y, e3.run(feed)["y"])
        assert not np.array_equal(e2.run(feed)["y"], e3.run(feed)["y"])
    finally:
        serve.delete("swap")


def test_overload_is_shed_with_503(ray_cluster, ray_server, engine_path, engine):
    from tensorforge.serve import app
    app.run_application(spec(engine_path, name="shed", max_ongoing_requests=1, max_queued_requests=1,
                             batch_wait_ms=300))
    try:
        feed = random_inputs(1, np.random.default_rng(2))
        expected = engine.run(feed)
        host, port = ray_server.http.split(":")
        body = json.dumps({"inputs": [{"name": n, "datatype": t, "shape": list(v.shape),
                                       "data": v.astype(float if t == "FP16" else v.dtype).reshape(-1).tolist()}
                                      for (n, v), t in zip(feed.items(), ("FP32", "FP16", "INT64", "BOOL"))]})

        def one(_):
            conn = http.client.HTTPConnection(host, int(port), timeout=30)
            conn.request("POST", "/v2/models/shed/infer", body=body)
            r = conn.getresponse()
            out = r.status, r.read()
            conn.close()
            return out
        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(one, range(12)))
        codes = sorted(s for s, _ in answers)
        assert 503 in codes and 200 in codes, codes
        for status, data in answers:
            if status == 200:
                y = np.array(json.loads(data)["outputs"][0]["data"], np.float32).reshape(1, 4)
                np.testing.assert_array_equal(y, expected["y"])
        assert one(0)[0] == 200
    finally:
        serve.delete("shed")
