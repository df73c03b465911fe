"""The v2 REST body codec without a server: bodies built by hand from the KServe v2 spec (JSON header, then raw
tensors in input order) decode to the arrays they were built from; encoded answers follow the same layout."""

import json

import numpy as np
import pytest

from tensorforge.serve.model import RequestError
from tensorforge.serve.protocol import decode_request, encode_response


def _binary_body(arrays: dict, types: dict):
    head = json.dumps({"inputs": [{"name": n, "datatype": types[n], "shape": list(a.shape),
                                   "parameters": {"binary_data_size": a.nbytes}} for n, a in arrays.items()]}).encode()
    return head + b"".join(a.tobytes() for a in arrays.values()), str(len(head))


def test_json_and_binary_inputs_decode_to_the_values_sent():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([[True, False]])
    body = json.dumps({"id": "r1", "inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 3],
                                               "data": [[0, 1, 2], [3, 4, 5]]},
                                              {"name": "b", "datatype": "BOOL", "shape": [1, 2], "data": [True, False]}]})
    head, feeds = decode_request(body.encode(), None)
    assert head["id"] == "r1"
    np.testing.assert_array_equal(feeds["x"], x)
    assert feeds["b"].dtype == np.bool_ and feeds["b"].tolist() == b.tolist()
    h = np.array([[1.5, -2.25]], np.float16)
    i = np.array([[2**40, -3]], np.int64)
    body, n = _binary_body({"h": h, "i": i}, {"h": "FP16", "i": "INT64"})
    _, feeds = decode_request(body, n)
    assert feeds["h"].dtype == np.float16 and feeds["h"].tolist() == [[1.5, -2.25]]
    assert feeds["i"].tolist() == [[2**40, -3]]


@pytest.mark.parametrize("mangle, words", [
    (lambda body, n: (body[:-1], n), "truncated"),
    (lambda body, n: (body + b"xx", n), "follow the last"),
    (lambda body, n: (body, str(len(body) + 1)), "exceeds"),
    (lambda body, n: (b"{not json", None), "not json"),
    (lambda body, n: (json.dumps({"inputs": [{"name": "x", "datatype": "FP17", "shape": [1], "data": [1]}]}).encode(),
                      None), "unknown datatype"),
    (lambda body, n: (json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2], "data": [1]}]}).encode(),
                      None), "1 values given for shape [2]"),
])
def test_malformed_bodies_name_the_problem(mangle, words):
    body, n = _binary_body({"x": np.zeros((2, 2), np.float32)}, {"x": "FP32"})
    with pytest.raises(RequestError) as info:
        decode_request(*mangle(body, n))
    assert words in str(info.value).lower()


def test_encode_binary_and_json_outputs():
    y = np.array([[1.0, 2.0]], np.float32)
    bb = np.array([[True, False, True]])
    request = {"id": "7", "outputs": [{"name": "y", "parameters": {"binary_data": True}}, {"name": "bb"}]}
    body, n = encode_response(request, "m", "1", {"y": y, "bb": bb}, ["y", "bb"])
    head = json.loads(body[:n])
    assert head["id"] == "7" and head["model_name"] == "m"
    assert head["outputs"][0] == {"name": "y", "datatype": "FP32", "shape": [1, 2], "parameters": {"binary_data_size": 8}}
    assert head["outputs"][1] == {"name": "bb", "datatype": "BOOL", "shape": [1, 3], "data": [True, False, True]}
    assert np.frombuffer(body[n:], np.float32).tolist() == [1.0, 2.0]
    body, n = encode_response({}, "m", "1", {"y": y, "bb": bb}, ["y", "bb"])
    assert n is None and [o["name"] for o in json.loads(body)["outputs"]] == ["y", "bb"]
    with pytest.raises(RequestError, match="unknown output 'z'"):
        encode_response({"outputs": [{"name": "z"}]}, "m", "1", {"y": y}, ["y"])
