"""v2 gRPC ModelInferRequest → numpy inputs, numpy outputs → ModelInferResponse (raw output contents).

Inputs come as `raw_input_contents` (one blob per input, in order: what tritonclient sends) or as typed
`contents` fields. Outputs always go back raw, since tritonclient's `as_numpy` reads only `raw_output_contents`.
"""

import math

import numpy as np

from .datatypes import numpy_dtype, v2_of_numpy
from .grpc_service import pb
from .model import RequestError

_TYPED = {"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
          "INT64": "int64_contents", "UINT8": "uint_contents", "FP32": "fp32_contents", "FP64": "fp64_contents"}


def decode_request(request) -> dict[str, np.ndarray]:
    raw = list(request.raw_input_contents)
    if raw and len(raw) != len(request.inputs):
        raise RequestError(f"{len(raw)} raw_input_contents for {len(request.inputs)} inputs",
                           "send one raw blob per input, or none")
    feeds = {}
    for k, t in enumerate(request.inputs):
        dtype = numpy_dtype(t.datatype)
        if dtype is None:
            raise RequestError(f"input {t.name!r} has unknown datatype {t.datatype!r}",
                               "use one of BOOL, INT8..INT64, UINT8, FP16, FP32, FP64")
        if t.name in feeds:
            raise RequestError(f"input {t.name!r} is given twice")
        shape = list(t.shape)
        if any(d < 0 for d in shape):
            raise RequestError(f"input {t.name!r} has shape {shape} with a negative dimension")
        count = math.prod(shape)
        if raw:
            if len(raw[k]) != count * dtype.itemsize:
                raise RequestError(f"input {t.name!r}: {len(raw[k])} raw bytes do not match shape {shape} of "
                                   f"{t.datatype} ({count * dtype.itemsize} bytes)")
            feeds[t.name] = np.frombuffer(raw[k], dtype=dtype).reshape(shape)
            continue
        field = _TYPED.get(t.datatype)
        values = getattr(t.contents, field) if field else ()
        if len(values) != count:
            raise RequestError(f"input {t.name!r}: {len(values)} values given for shape {shape} ({count} values)"
                               + ("" if field else f"; {t.datatype} travels only as raw_input_contents"))
        feeds[t.name] = np.asarray(values, dtype=dtype).reshape(shape)
    return feeds


def encode_response(request, model: str, version: str, outputs: dict[str, np.ndarray], order: list[str]):
    wanted = [o.name for o in request.outputs] or order
    unknown = [n for n in wanted if n not in outputs]
    if unknown:
        raise RequestError(f"unknown output {unknown[0]!r}", f"the model's outputs are: {', '.join(order)}")
    response = pb.ModelInferResponse(model_name=model, model_version=version, id=request.id)
    for n in wanted:
        arr = np.ascontiguousarray(outputs[n])
        response.outputs.add(name=n, datatype=v2_of_numpy(arr.dtype), shape=list(arr.shape))
        response.raw_output_contents.append(arr.tobytes())
    return response


def metadata_response(meta: dict):
    return pb.ModelMetadataResponse(
        name=meta["name"], versions=meta["versions"], platform=meta["platform"],
        inputs=[pb.ModelMetadataResponse.TensorMetadata(**t) for t in meta["inputs"]],
        outputs=[pb.ModelMetadataResponse.TensorMetadata(**t) for t in meta["outputs"]])
