"""NVIDIA's tritonclient (HTTP JSON, HTTP binary, gRPC) against both servers: the Ray Serve application and the
real tritonserver running the exported repository. Oracle: `engine.run` on the same inputs, in this process."""

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from serve_models import random_inputs

V2 = {np.dtype(np.float32): "FP32", np.dtype(np.float16): "FP16", np.dtype(np.int64): "INT64", np.dtype(bool): "BOOL"}


def _binary(arr, binary) -> bool:
    """FP16 travels binary even in "JSON" requests: Triton refuses FP16 as JSON numbers (so both servers get it so)."""
    return binary or arr.dtype == np.float16


def _inputs(module, feed, binary=None):
    out = []
    for name, arr in feed.items():
        t = module.InferInput(name, list(arr.shape), V2[arr.dtype])
        if binary is None:
            t.set_data_from_numpy(arr)
        else:
            t.set_data_from_numpy(arr, binary_data=_binary(arr, binary))
        out.append(t)
    return out


def _assert_equal(result, expected):
    for name, want in expected.items():
        got = result.as_numpy(name)
        assert got is not None, f"output {name!r} missing"
        assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, got.shape, want.dtype, want.shape)
        np.testing.assert_array_equal(got, want, err_msg=name)


def test_health_and_server_metadata(server):
    http = httpclient.InferenceServerClient(server.http)
    grpc = grpcclient.InferenceServerClient(server.grpc)
    assert http.is_server_live() and http.is_server_ready() and http.is_model_ready(server.model)
    assert grpc.is_server_live(headers=server.headers) and grpc.is_server_ready(headers=server.headers)
    assert grpc.is_model_ready(server.model, headers=server.headers)
    assert "binary_tensor_data" in http.get_server_metadata()["extensions"]
    assert not http.is_model_ready("no_such_model")


def test_model_metadata_is_the_engines(server, engine):
    http = httpclient.InferenceServerClient(server.http).get_model_metadata(server.model)
    grpc = grpcclient.InferenceServerClient(server.grpc).get_model_metadata(server.model, headers=server.headers,
                                                                           as_json=True)
    expected_in = [{"name": t.name, "datatype": V2[np.dtype(str(t.dtype).replace("torch.", ""))], "shape": [-1, w]}
                   for t, w in zip(engine.data.inputs, (4, 3, 2, 2))]
    assert http["name"] == server.model and http["inputs"] == expected_in
    assert [o["name"] for o in http["outputs"]] == engine.output_names
    assert [o["datatype"] for o in http["outputs"]] == ["FP32", "FP16", "INT64", "BOOL"]
    # gRPC's JSON form spells shapes as strings (int64 in proto3 JSON)
    assert [(t["name"], t["datatype"], [int(d) for d in t["shape"]]) for t in grpc["inputs"]] == \
        [(t["name"], t["datatype"], t["shape"]) for t in expected_in]
    assert grpc["outputs"] and [t["name"] for t in grpc["outputs"]] == engine.output_names


def test_both_servers_give_the_same_metadata(ray_server, triton_server):
    a = httpclient.InferenceServerClient(ray_server.http).get_model_metadata(ray_server.model)
    b = httpclient.InferenceServerClient(triton_server.http).get_model_metadata(triton_server.model)
    for key in ("name", "versions", "inputs", "outputs"):
        assert a[key] == b[key], key


@pytest.mark.parametrize("rows", [1, 3, 8])
@pytest.mark.parametrize("wire", ["http-json", "http-binary", "grpc"])
def test_infer_equals_engine_run(server, engine, wire, rows):
    feed = random_inputs(rows, np.random.default_rng(rows * 7 + len(wire)))
    expected = engine.run(feed)
    if wire == "grpc":
        client = grpcclient.InferenceServerClient(server.grpc)
        result = client.infer(server.model, _inputs(grpcclient, feed), headers=server.headers)
    else:
        binary = wire == "http-binary"
        client = httpclient.InferenceServerClient(server.http)
        outputs = [httpclient.InferRequestedOutput(n, binary_data=_binary(expected[n], binary))
                   for n in engine.output_names]
        result = client.infer(server.model, _inputs(httpclient, feed, binary), outputs=outputs)
        sent_binary = [o.get("parameters", {}).get("binary_data_size") is not None
                       for o in result.get_response()["outputs"]]
        assert sent_binary == [_binary(expected[n], binary) for n in engine.output_names], "not the format asked for"
    _assert_equal(result, expected)


def test_requested_subset_of_outputs(server, engine):
    feed = random_inputs(2, np.random.default_rng(5))
    client = httpclient.InferenceServerClient(server.http)
    result = client.infer(server.model, _inputs(httpclient, feed), outputs=[httpclient.InferRequestedOutput("ii")])
    assert [o["name"] for o in result.get_response()["outputs"]] == ["ii"]
    np.testing.assert_array_equal(result.as_numpy("ii"), engine.run(feed)["ii"])
