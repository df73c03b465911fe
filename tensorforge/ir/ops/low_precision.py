"""Element types narrower than a byte, and ONNX's float8 saturation rules — helpers for the op references.

Storage convention: int4/uint4/int2/uint2 tensors are torch.int4/uint4/int2/uint2 holding ONE value per
byte (sign-extended for the signed types, i.e. the int8/uint8 bit pattern); FLOAT4E2M1 is
torch.float4_e2m1fn_x2 holding one 4-bit code per byte (low nibble: sign bit 3, exponent bits 2–1,
mantissa bit 0). These dtypes have no torch kernels: `as_int`/`from_int` and `float4_decode`/`float4_encode`
move between them and computable types; `wrap_int` wraps integers into them, `to_float8e8m0` encodes MX scales.
Engines store them as uint8 bytes (engine/serialize.py).
"""

import torch

SUBBYTE_INT = {torch.int4: (-8, 7), torch.uint4: (0, 15), torch.int2: (-2, 1), torch.uint2: (0, 3)}
FLOAT4 = torch.float4_e2m1fn_x2
FLOAT8 = (torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2, torch.float8_e5m2fnuz)
_F4_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
INT_RANGES = {torch.int8: (-128, 127), torch.uint8: (0, 255), torch.int16: (-32768, 32767),
              torch.uint16: (0, 65535), torch.int32: (-2**31, 2**31 - 1), **SUBBYTE_INT}


def as_int(t: torch.Tensor) -> torch.Tensor:
    """A sub-byte integer tensor as int8/uint8 (same bytes); any other tensor unchanged."""
    if t.dtype in (torch.int4, torch.int2):
        return t.view(torch.int8)
    if t.dtype in (torch.uint4, torch.uint2):
        return t.view(torch.uint8)
    return t


def from_int(v: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Integer values already inside dtype's range → a tensor of `dtype` (sub-byte: one value a byte)."""
    if dtype in (torch.int4, torch.int2):
        return v.to(torch.int8).view(dtype)
    if dtype in (torch.uint4, torch.uint2):
        return v.to(torch.uint8).view(dtype)
    return v.to(dtype)


def float4_decode(t: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """FLOAT4E2M1 codes → values."""
    code = t.view(torch.uint8).to(torch.int64) & 0xF
    mag = torch.take(torch.tensor(_F4_VALUES, dtype=dtype).to(t.device), code & 7)
    return torch.where(code >= 8, -mag, mag)


def float4_encode(x: torch.Tensor) -> torch.Tensor:
    """Values → FLOAT4E2M1 codes: round to nearest, ties to even mantissa, saturating at ±6 (the type has
    no inf/NaN; NaN encodes as +6 here, as ml_dtypes does for this type)."""
    xf = x.float()
    a = torch.nan_to_num(xf.abs(), nan=6.0).clamp(max=6.0)
    grid = torch.tensor(_F4_VALUES).to(x.device)
    dist = (a.unsqueeze(-1) - grid).abs()
    best = dist.min(dim=-1, keepdim=True).values
    tie_even = (dist == best) & (torch.arange(8, device=x.device) % 2 == 0)
    idx = torch.where(tie_even.any(-1), tie_even.to(torch.int64).argmax(-1), dist.argmin(-1))
    code = idx + torch.where(torch.signbit(xf) & (idx > 0), 8, 0)
    return code.to(torch.uint8).view(FLOAT4)


def to_float8(x: torch.Tensor, dtype: torch.dtype, saturate: bool = True) -> torch.Tensor:
    """float → float8 with ONNX's rules: saturate clamps to ±max (±inf too); otherwise out-of-range values
    become inf (e5m2) or NaN (the types without inf). Rounding is to nearest even."""
    big = torch.finfo(dtype).max
    xf = x.float()
    if saturate:
        return xf.clamp(-big, big).to(dtype)
    y = xf.to(dtype)
    if dtype == torch.float8_e4m3fn:   # torch saturates this type; ONNX (saturate=0) gives NaN past max + ½ulp
        y = torch.where(xf.abs() > 464.0, torch.full_like(xf, float("nan")), xf).to(dtype)
    return y


def to_float(t: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Any stored element type → a computable float tensor."""
    if t.dtype == FLOAT4:
        return float4_decode(t, dtype)
    return as_int(t).to(dtype)


E8M0 = torch.float8_e8m0fnu


def to_float8e8m0(x: torch.Tensor, saturate: bool = True, round_mode: str = "up") -> torch.Tensor:
    """float → FLOAT8E8M0 (value 2^(e−127), e = 0..254; code 255 is NaN; no sign, no zero), from the float32
    bits b: e = exponent field of b, rounded by the 23 mantissa bits m —
        up: e + (m ≠ 0)     down: e     nearest: e + 1 when m ≥ ½ (exactly ½ rounds up unless e = 0).
    saturate stops at e = 254 (E8M0_MAX), otherwise overflow gives NaN; NaN → NaN, ±Inf → E8M0_MAX if saturate
    else NaN (the spec's table). The sign is ignored (negative inputs are unspecified in ONNX).
    One read of x, one byte written per element."""
    bits = x.float().view(torch.int32).to(torch.int64) & 0x7FFFFFFF
    exp, man = bits >> 23, bits & 0x7FFFFF
    if round_mode == "up":
        inc = man != 0
    elif round_mode == "down":
        inc = torch.zeros_like(man, dtype=torch.bool)
    elif round_mode == "nearest":
        inc = ((man >> 22) & 1 == 1) & (((man & 0x3FFFFF) != 0) | (exp > 0))
    else:
        raise ValueError(f"round_mode must be 'up', 'down' or 'nearest', got {round_mode!r}")
    if saturate:
        inc = inc & (exp < 254)
    e = exp + inc.to(torch.int64)
    special = exp == 255
    inf = special & (man == 0)
    e = torch.where(special, torch.full_like(e, 255), e)
    if saturate:
        e = torch.where(inf, torch.full_like(e, 254), e)
    return e.to(torch.uint8).view(E8M0)


def wrap_int(v: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """int64 values → `dtype` keeping the low bits (two's-complement wrap-around: 8 → -8 for int4, -1 → 3 for
    uint2), the way ONNX casts an out-of-range integer; sub-byte results hold one value a byte (from_int)."""
    if dtype not in SUBBYTE_INT:
        return v.to(dtype)
    lo, hi = SUBBYTE_INT[dtype]
    span = hi - lo + 1
    return from_int(torch.remainder(v - lo, span) + lo, dtype)
