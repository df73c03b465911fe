"""Element types. The IR uses `torch.dtype` directly; this module names them for files and messages."""

import torch

_NAMES = {
    torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float64: "float64",
    torch.int8: "int8", torch.int16: "int16", torch.int32: "int32", torch.int64: "int64",
    torch.uint8: "uint8", torch.uint16: "uint16", torch.uint32: "uint32", torch.uint64: "uint64",
    torch.bool: "bool", torch.complex64: "complex64", torch.complex128: "complex128",
    torch.float8_e4m3fn: "float8_e4m3fn", torch.float8_e4m3fnuz: "float8_e4m3fnuz",
    torch.float8_e5m2: "float8_e5m2", torch.float8_e5m2fnuz: "float8_e5m2fnuz",
    torch.float8_e8m0fnu: "float8_e8m0fnu", torch.float4_e2m1fn_x2: "float4_e2m1",   # one value a byte
    torch.int4: "int4", torch.uint4: "uint4", torch.int2: "int2", torch.uint2: "uint2",  # (ops/low_precision.py)
}
_BY_NAME = {v: k for k, v in _NAMES.items()}
_FLOATS = {torch.float32, torch.float16, torch.bfloat16, torch.float64}


def dtype_name(dtype: torch.dtype) -> str:
    return _NAMES.get(dtype, str(dtype).replace("torch.", ""))


def dtype_from_name(name: str) -> torch.dtype:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown dtype name {name!r}") from None


def is_float(dtype: torch.dtype) -> bool:
    """True for the floating types that precision flags (--fp16, --bf16) may convert."""
    return dtype in _FLOATS
