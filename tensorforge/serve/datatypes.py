"""Open Inference Protocol datatypes ↔ numpy/torch dtypes, and an engine binding as v2 tensor metadata."""

import numpy as np
import torch

from ..util.errors import InputError

# v2 datatype → (numpy dtype, torch dtype); the engine dtypes a v2 client can send
_TABLE = {
    "BOOL": (np.dtype(np.bool_), torch.bool), "UINT8": (np.dtype(np.uint8), torch.uint8),
    "INT8": (np.dtype(np.int8), torch.int8), "INT16": (np.dtype(np.int16), torch.int16),
    "INT32": (np.dtype(np.int32), torch.int32), "INT64": (np.dtype(np.int64), torch.int64),
    "FP16": (np.dtype(np.float16), torch.float16), "FP32": (np.dtype(np.float32), torch.float32),
    "FP64": (np.dtype(np.float64), torch.float64),
}
_BY_TORCH = {t: name for name, (_, t) in _TABLE.items()}
_BY_NUMPY = {n: name for name, (n, _) in _TABLE.items()}
# Triton's config.pbtxt spelling
TRITON_TYPE = {"BOOL": "TYPE_BOOL", "UINT8": "TYPE_UINT8", "INT8": "TYPE_INT8", "INT16": "TYPE_INT16",
               "INT32": "TYPE_INT32", "INT64": "TYPE_INT64", "FP16": "TYPE_FP16", "FP32": "TYPE_FP32",
               "FP64": "TYPE_FP64"}


def v2_name(dtype: torch.dtype) -> str:
    """The v2 datatype of a torch dtype (an engine binding's type)."""
    try:
        return _BY_TORCH[dtype]
    except KeyError:
        raise InputError(f"dtype {dtype} has no Open Inference Protocol datatype",
                         "serve engines whose inputs and outputs are bool, integer or float16/32/64") from None


def v2_of_numpy(dtype: np.dtype) -> str:
    return _BY_NUMPY[np.dtype(dtype)]


def numpy_dtype(v2: str) -> np.dtype | None:
    """numpy dtype of a v2 datatype name; None when the name is not one this server handles."""
    entry = _TABLE.get(v2)
    return entry[0] if entry else None


def is_known(v2: str) -> bool:
    return v2 in _TABLE
