"""The v2 REST infer body: JSON and the binary tensor extension, decoded to numpy and encoded back.

A request is a JSON header, optionally followed by raw tensors (`Inference-Header-Content-Length` gives the JSON's
length; each binary input says its `binary_data_size`, in input order). Outputs go back as binary when the request
asks (`binary_data` per output, or `binary_data_output` for all), else as flat JSON lists. Every malformed body is a
RequestError naming what is wrong (HTTP 400).
"""

import json
import math

import numpy as np

from .datatypes import numpy_dtype, v2_of_numpy
from .model import RequestError


def _array(name, datatype, shape, raw: bytes | None, data) -> np.ndarray:
    dtype = numpy_dtype(datatype) if isinstance(datatype, str) else None
    if dtype is None:
        raise RequestError(f"input {name!r} has unknown datatype {datatype!r}",
                           "use one of BOOL, INT8..INT64, UINT8, FP16, FP32, FP64")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise RequestError(f"input {name!r} has shape {shape!r}, not a list of non-negative integers")
    count = math.prod(shape)
    if raw is not None:
        if len(raw) != count * dtype.itemsize:
            raise RequestError(f"input {name!r}: binary_data_size {len(raw)} does not match shape {shape} of "
                               f"{datatype} ({count * dtype.itemsize} bytes)")
        return np.frombuffer(raw, dtype=dtype).reshape(shape)
    if data is None:
        raise RequestError(f"input {name!r} has neither 'data' nor a binary_data_size")
    try:
        arr = np.asarray(data, dtype=dtype)
    except (TypeError, ValueError) as e:
        raise RequestError(f"input {name!r}: data is not {datatype} values ({e})") from e
    if arr.size != count:
        raise RequestError(f"input {name!r}: {arr.size} values given for shape {shape} ({count} values)")
    return arr.reshape(shape)


def decode_request(body: bytes, header_length: str | None) -> tuple[dict, dict[str, np.ndarray]]:
    """→ (the JSON header, input name → array). Raises RequestError for a malformed body."""
    if header_length is not None:
        try:
            n = int(header_length)
        except ValueError:
            raise RequestError(f"Inference-Header-Content-Length {header_length!r} is not an integer") from None
        if not 0 < n <= len(body):
            raise RequestError(f"Inference-Header-Content-Length {n} exceeds the body's {len(body)} bytes")
        head, tail = body[:n], memoryview(body)[n:]
    else:
        head, tail = body, memoryview(b"")
    try:
        request = json.loads(head)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RequestError(f"request body is not JSON ({e})", "send a v2 inference request") from None
    if not isinstance(request, dict) or not isinstance(request.get("inputs"), list):
        raise RequestError("request has no 'inputs' list", "send a v2 inference request")
    feeds, offset = {}, 0
    for entry in request["inputs"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise RequestError("an input has no 'name'")
        name = entry["name"]
        if name in feeds:
            raise RequestError(f"input {name!r} is given twice")
        size = (entry.get("parameters") or {}).get("binary_data_size")
        raw = None
        if size is not None:
            if not isinstance(size, int) or size < 0:
                raise RequestError(f"input {name!r}: binary_data_size {size!r} is not a byte count")
            if offset + size > len(tail):
                raise RequestError(f"truncated binary payload: input {name!r} needs {size} bytes at offset {offset}, "
                                   f"the body has {len(tail) - offset} left")
            raw = bytes(tail[offset:offset + size])
            offset += size
        feeds[name] = _array(name, entry.get("datatype"), entry.get("shape"), raw, entry.get("data"))
    if offset != len(tail):
        raise RequestError(f"{len(tail) - offset} bytes of binary payload follow the last binary input")
    return request, feeds


def encode_response(request: dict, model: str, version: str, outputs: dict[str, np.ndarray],
                    order: list[str]) -> tuple[bytes, int | None]:
    """→ (body, JSON header length or None when all JSON). Only requested outputs (all when none named)."""
    params = request.get("parameters") or {}
    all_binary = bool(params.get("binary_data_output", False))
    wanted = request.get("outputs")
    if wanted:
        names = [o.get("name") for o in wanted]
        unknown = [n for n in names if n not in outputs]
        if unknown:
            raise RequestError(f"unknown output {unknown[0]!r}", f"the model's outputs are: {', '.join(order)}")
        binary = {o["name"]: bool((o.get("parameters") or {}).get("binary_data", all_binary)) for o in wanted}
    else:
        names, binary = order, {n: all_binary for n in order}
    tensors, blobs = [], []
    for n in names:
        arr = np.ascontiguousarray(outputs[n])
        entry = {"name": n, "datatype": v2_of_numpy(arr.dtype), "shape": list(arr.shape)}
        if binary[n]:
            blob = arr.tobytes()
            entry["parameters"] = {"binary_data_size": len(blob)}
            blobs.append(blob)
        else:
            entry["data"] = arr.reshape(-1).tolist()
        tensors.append(entry)
    head = {"model_name": model, "model_version": version, "outputs": tensors}
    if "id" in request:
        head["id"] = request["id"]
    text = json.dumps(head).encode()
    if not blobs:
        return text, None
    return b"".join([text, *blobs]), len(text)
