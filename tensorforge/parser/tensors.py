"""ONNX TensorProto / element types → torch."""

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from ..util.errors import ModelError

ONNX_TO_TORCH = {
    onnx.TensorProto.FLOAT: torch.float32, onnx.TensorProto.FLOAT16: torch.float16,
    onnx.TensorProto.BFLOAT16: torch.bfloat16, onnx.TensorProto.DOUBLE: torch.float64,
    onnx.TensorProto.INT8: torch.int8, onnx.TensorProto.INT16: torch.int16, onnx.TensorProto.INT32: torch.int32,
    onnx.TensorProto.INT64: torch.int64, onnx.TensorProto.UINT8: torch.uint8, onnx.TensorProto.UINT16: torch.uint16,
    onnx.TensorProto.UINT32: torch.uint32, onnx.TensorProto.UINT64: torch.uint64, onnx.TensorProto.BOOL: torch.bool,
    onnx.TensorProto.COMPLEX64: torch.complex64, onnx.TensorProto.COMPLEX128: torch.complex128,
    onnx.TensorProto.FLOAT8E4M3FN: torch.float8_e4m3fn, onnx.TensorProto.FLOAT8E4M3FNUZ: torch.float8_e4m3fnuz,
    onnx.TensorProto.FLOAT8E5M2: torch.float8_e5m2, onnx.TensorProto.FLOAT8E5M2FNUZ: torch.float8_e5m2fnuz,
    # sub-byte types: one value per byte (see ir/ops/low_precision.py)
    onnx.TensorProto.INT4: torch.int4, onnx.TensorProto.UINT4: torch.uint4, onnx.TensorProto.INT2: torch.int2,
    onnx.TensorProto.UINT2: torch.uint2, onnx.TensorProto.FLOAT4E2M1: torch.float4_e2m1fn_x2,
    onnx.TensorProto.FLOAT8E8M0: torch.float8_e8m0fnu,
}
_UNPACKED = {torch.int4: np.int8, torch.int2: np.int8, torch.uint4: np.uint8, torch.uint2: np.uint8}
TORCH_TO_ONNX = {v: k for k, v in ONNX_TO_TORCH.items()}


def torch_dtype(elem_type: int, where: str = "") -> torch.dtype:
    try:
        return ONNX_TO_TORCH[elem_type]
    except KeyError:
        name = onnx.TensorProto.DataType.Name(elem_type) if elem_type in onnx.TensorProto.DataType.values() else elem_type
        raise ModelError(f"{where}element type {name} is not supported",
                         "cast the tensor to a supported type in the exporter") from None


def to_torch(proto: onnx.TensorProto, base_dir: str | None = None) -> torch.Tensor:
    """Decode an initializer or attribute tensor (external data is read relative to base_dir)."""
    dtype = torch_dtype(proto.data_type, f"tensor {proto.name!r}: ")
    try:
        arr = numpy_helper.to_array(proto, base_dir or "")
    except Exception as e:  # noqa: BLE001 - any decode failure is a model problem
        raise ModelError(f"cannot decode tensor {proto.name!r}: {e}",
                         "the file may be truncated, or its external data file missing") from e
    if dtype in _UNPACKED:          # ml_dtypes int4/int2 arrays (one value a byte) → sign/zero-extended bytes
        return torch.from_numpy(arr.astype(_UNPACKED[dtype])).view(dtype)
    if dtype in (torch.float4_e2m1fn_x2, torch.float8_e8m0fnu):   # one code a byte, raw bits
        return torch.from_numpy(np.array(arr, order="C").view(np.uint8).copy()).view(dtype)
    if dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2, torch.float8_e5m2fnuz):
        # numpy_helper returns ml_dtypes arrays; reinterpret the raw bits
        bits = {1: torch.uint8, 2: torch.int16}[arr.dtype.itemsize]
        raw = torch.from_numpy(np.array(arr, order="C").view(np.uint8 if arr.dtype.itemsize == 1 else np.int16).copy())
        return raw.view(bits).view(dtype)
    return torch.from_numpy(np.array(arr, copy=True))
