"""Shared pieces of the quantized tactics (QuantizedConv / QuantizedMatMul, ir/ops/quantized.py): the layer's
quantization parameters as device tensors, the GEMM view of a convolution (implicit im2col on NHWC int8), the
integer correction for an activation zero point, and the epilogue in torch ops (ir.ops.quantized.requantize,
the reference's own code, so a tactic with an exact accumulator is bit-exact to the op's reference).

GEMM form: A (M, K) quantized activations, B (N, K) quantized weights (as stored), acc (M, N) = A·Bᵀ.
uint8 activations become int8 by x − 128 (zero point z − 128), so every integer GEMM is int8 × int8:
    Σ_k (x − z)(w − zw) = Σ x'w − zw·Σ_k x' − z'·Σ_k w + K·z'·zw,     x' = x − 128, z' = z − 128
Traffic of the im2col: one int8 write and read of N·OH·OW·kh·kw·C bytes (none for 1×1 stride-1 convolutions).
"""

from dataclasses import dataclass

import torch

from ..ir.ops.low_precision import FLOAT8
from ..ir.ops.quantized import channel_multiplier, requantize


@dataclass
class QuantParams:
    x_zp: int                    # the activation zero point as stored (uint8 or int8 range)
    w_zp: torch.Tensor | None    # (N,) int32, or None for symmetric weights
    mult: torch.Tensor           # (N,) or (1,) float32
    attrs: dict

    def int8_zero_point(self, x: torch.Tensor) -> int:
        """The zero point of as_int8(x)."""
        return self.x_zp - 128 if x.dtype == torch.uint8 else self.x_zp


def quant_params(layer, device) -> QuantParams:
    a = layer.attrs
    wzp = a.get("w_zero_point")
    return QuantParams(int(a.get("x_zero_point", 0)),
                       None if not wzp else torch.tensor(wzp, dtype=torch.int32, device=device).reshape(-1),
                       channel_multiplier(a["x_scale"], a["w_scale"]).to(device), a)


def as_int8(x: torch.Tensor) -> torch.Tensor:
    """uint8 → int8 by subtracting 128 (exact); int8 unchanged."""
    if x.dtype == torch.uint8:
        return (x.to(torch.int16) - 128).to(torch.int8)
    return x


def conv_is_gemm_reason(layer) -> str | None:
    """Why a QuantizedConv is not run as an (implicit) GEMM here."""
    a = layer.attrs
    if a.get("group", 1) != 1:
        return f"grouped convolution (group={a.get('group')}) runs on the reference"
    ks = a.get("kernel_shape")
    if ks is None or len(ks) != 2:
        return f"kernel_shape {ks}: the GEMM path takes 2-D convolutions with a known kernel shape"
    if a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return f"auto_pad={a['auto_pad']}"
    return None


def im2col(x: torch.Tensor, w_shape, attrs: dict, pad_value: int) -> tuple[torch.Tensor, tuple[int, int, int]]:
    """x (N, C, H, W) quantized → A (N·OH·OW, kh·kw·C) in (kh, kw, C) order, padding with `pad_value` (the
    zero point, i.e. a real 0). Returns A and (N, OH, OW). A 1×1 stride-1 unpadded conv is a view of NHWC x."""
    if x.dtype in FLOAT8:            # moved as bytes (0x00 is +0.0); no fill/copy kernels needed for fp8
        cols, nhw = im2col(x.view(torch.uint8), w_shape, attrs, 0)
        return cols.view(x.dtype), nhw
    n, c, h, w = x.shape
    kh, kw = w_shape[2], w_shape[3]
    sh, sw = attrs.get("strides") or (1, 1)
    dh, dw = attrs.get("dilations") or (1, 1)
    p = attrs.get("pads") or (0, 0, 0, 0)
    xl = x.permute(0, 2, 3, 1)
    if any(p):
        xp = torch.full((n, h + p[0] + p[2], w + p[1] + p[3], c), pad_value, dtype=x.dtype, device=x.device)
        xp[:, p[0]:p[0] + h, p[1]:p[1] + w] = xl
        xl = xp
    hh, ww = xl.shape[1], xl.shape[2]
    oh, ow = (hh - dh * (kh - 1) - 1) // sh + 1, (ww - dw * (kw - 1) - 1) // sw + 1
    if kh == kw == 1 and sh == sw == 1:
        return xl.reshape(n * oh * ow, c), (n, oh, ow)
    xl = xl.contiguous()
    s = xl.stride()
    cols = xl.as_strided((n, oh, ow, kh, kw, c), (s[0], s[1] * sh, s[2] * sw, s[1] * dh, s[2] * dw, s[3]))
    return cols.reshape(n * oh * ow, kh * kw * c), (n, oh, ow)


def conv_weight_matrix(w: torch.Tensor) -> torch.Tensor:
    """(C_out, C_in, kh, kw) → (C_out, kh·kw·C_in), matching im2col's column order."""
    return w.permute(0, 2, 3, 1).reshape(w.shape[0], -1).contiguous()


def zero_point_correction(acc: torch.Tensor, a8: torch.Tensor, b8: torch.Tensor, z: int, w_zp) -> torch.Tensor:
    """acc (M, N) int32 = A'·Bᵀ → Σ (x' − z')(w − zw) (module doc), in int32 (exact); z = z', the int8 zero point."""
    k = a8.shape[1]
    if z:
        acc = acc - z * b8.to(torch.int32).sum(1)[None, :]
    if w_zp is not None:
        acc = acc - a8.to(torch.int32).sum(1, keepdim=True) * w_zp[None, :] + k * z * w_zp[None, :]
    return acc


def epilogue_2d(acc: torch.Tensor, bias, residual, p: QuantParams, post_bias=None) -> torch.Tensor:
    """The op's epilogue on a (M, N) accumulator (channels last), residual given as (M, N)."""
    return requantize(acc, p.mult, bias, residual, p.attrs, acc.dim() - 1, post_bias)


def to_nchw(y2: torch.Tensor, nhw: tuple[int, int, int]) -> torch.Tensor:
    """(N·OH·OW, C) → (N, C, OH, OW) as a view (channels-last memory)."""
    n, oh, ow = nhw
    return y2.reshape(n, oh, ow, -1).permute(0, 3, 1, 2)


def residual_rows(residual, m: int):
    """A (N, C, H, W) residual as the (N·H·W, C) rows of the GEMM output (a view when channels-last)."""
    if residual is None:
        return None
    return residual.permute(0, 2, 3, 1).reshape(m, -1)


def is_fp8(t: torch.Tensor) -> bool:
    return t.dtype in FLOAT8
