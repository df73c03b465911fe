"""The GEMM form of QuantizedMatMul / QuantizedConv shared by the integer and fp8 GEMM tactics: operands as
A (M, K) and B (N, K) 8-bit matrices (im2col for convolutions, weights reordered once per kernel), a GEMM
callback, the zero-point correction and the reference epilogue, and the output put back in the op's shape.

    run(inputs):  A, B = gemm_view(x, w) → acc = gemm(A, B) (M, N) → correct(acc) → epilogue → reshape
Entry point: `make_gemm_kernel(layer, device, gemm, fused_epilogue=None)`; a tactic whose kernel also runs the
epilogue passes `fused_epilogue(a8, b8, z8, w_zp, bias, res2, params) -> (M, N) output`.
"""

import torch

from .byte_copy import dense_rows
from .torch_fused import rows_in_memory_order
from .quant_common import (as_int8, conv_is_gemm_reason, conv_weight_matrix, epilogue_2d, im2col, is_fp8,
                           quant_params, residual_rows, to_nchw, zero_point_correction)

GEMM_OPS = ("QuantizedMatMul", "QuantizedConv")


def gemm_layer_reason(layer) -> str | None:
    if layer.op not in GEMM_OPS:
        return f"{layer.op} has no GEMM form here"
    return conv_is_gemm_reason(layer) if layer.op == "QuantizedConv" else None


def weight_zero_points(layer, w: torch.Tensor, device):
    """Per-channel int32 zero points of as_int8(w) (uint8 weights shift by 128), None when all are 0."""
    zp = layer.attrs.get("w_zero_point")
    if w.dtype != torch.uint8:
        return None if not zp else torch.tensor(zp, dtype=torch.int32, device=device).reshape(-1)
    base = torch.tensor(zp or [0], dtype=torch.int32, device=device).reshape(-1)
    return base - 128


def conv_geometry(x: torch.Tensor, w_shape, attrs: dict, z_raw: int) -> dict:
    """Output size and strides/pads/dilations of a 2-D convolution, for the implicit-GEMM kernel."""
    kh, kw = w_shape[2], w_shape[3]
    sh, sw = attrs.get("strides") or (1, 1)
    dh, dw = attrs.get("dilations") or (1, 1)
    p = attrs.get("pads") or (0, 0, 0, 0)
    oh = (x.shape[2] + p[0] + p[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (x.shape[3] + p[1] + p[3] - dw * (kw - 1) - 1) // sw + 1
    return {"M": x.shape[0] * oh * ow, "OH": oh, "OW": ow, "KW": kw, "strides": (sh, sw), "pads": (p[0], p[1]),
            "dilations": (dh, dw), "z_raw": z_raw, "nhw": (x.shape[0], oh, ow)}


def triton_im2col(x: torch.Tensor) -> bool:
    """Whether the explicit-GEMM form builds its matrix with the Triton im2col (CUDA tensors; tests set it)."""
    return x.is_cuda


def _copies(w_shape, attrs) -> bool:
    """Whether quant_common.im2col would copy (anything but a 1×1, stride-1, unpadded convolution)."""
    return tuple(w_shape[2:]) != (1, 1) or tuple(attrs.get("strides") or (1, 1)) != (1, 1) or \
        any(attrs.get("pads") or ())


def make_gemm_kernel(layer, device, gemm, fused_epilogue=None, implicit_conv=False):
    p = quant_params(layer, device)
    conv = layer.op == "QuantizedConv"
    prepared: dict = {}

    def weights(w):
        key = (w.data_ptr(), w._version)
        if key not in prepared:
            prepared.clear()
            b = w if is_fp8(w) else as_int8(w)
            b = conv_weight_matrix(b) if conv else b.contiguous()
            prepared[key] = (b, weight_zero_points(layer, w, device))
        return prepared[key]

    def run(inputs):
        x, w = inputs[0], inputs[1]
        bias = inputs[2] if len(inputs) > 2 else None
        res = inputs[3] if len(inputs) > 3 else None
        post = inputs[4] if len(inputs) > 4 else None
        b8, w_zp = weights(w)
        z8 = 0 if is_fp8(x) else p.int8_zero_point(x)
        if conv and implicit_conv:
            geom = conv_geometry(x, w.shape, layer.attrs, 0 if is_fp8(x) else p.x_zp)
            y2 = fused_epilogue(x, b8, z8, w_zp, bias, residual_rows(res, geom["M"]), post, p, geom)
            return [to_nchw(y, geom["nhw"]) for y in (y2 if isinstance(y2, tuple) else (y2,))]
        if conv and fused_epilogue is not None and triton_im2col(x) and not is_fp8(x) and _copies(w.shape, layer.attrs):
            from .quant_im2col import im2col_int8      # Triton: imported only on CUDA (CPU engines run without it)
            a8, nhw = im2col_int8(x, w.shape, layer.attrs, z8, row_stride=-(-b8.shape[1] // 16) * 16, shift=True)
            res2 = residual_rows(res, a8.shape[0])
        elif conv:
            a8, nhw = im2col(x if is_fp8(x) else as_int8(x), w.shape, layer.attrs, z8)
            res2 = residual_rows(res, a8.shape[0])
        else:
            y = matmul_rows(x, b8, (z8, w_zp, bias, post), res)
            return list(y) if isinstance(y, tuple) else [y]
        y2 = product_2d(a8, b8, (z8, w_zp, bias, post), res2, x)
        return [to_nchw(y, nhw) for y in (y2 if isinstance(y2, tuple) else (y2,))]

    def product_2d(a8, b8, terms, res2, x):
        """The (M, N) output(s) of the A (M, K) · B (N, K)ᵀ product and its epilogue."""
        z8, w_zp, bias, post = terms
        if fused_epilogue is not None:
            return fused_epilogue(a8, b8, z8, w_zp, bias, res2, post, p)
        acc = gemm(a8, b8)
        if not is_fp8(x):
            acc = zero_point_correction(acc, a8, b8, z8, w_zp)
        return epilogue_2d(acc, bias, res2, p, post)

    @rows_in_memory_order
    def matmul_rows(x, b8, terms, res):
        """x (…, K) → y (…, N), row by row; an x whose leading dims are a permuted dense layout (ViT's transposed
        activations, passes/rules/qgemm_rows.py) arrives here in its memory order, so its rows are a view."""
        lead = x.shape[:-1]
        a8 = dense_rows(x if is_fp8(x) else as_int8(x))
        res2 = None if res is None else res.reshape(a8.shape[0], -1)
        y2 = product_2d(a8, b8, terms, res2, x)
        return tuple(y.reshape(*lead, -1) for y in y2) if isinstance(y2, tuple) else y2.reshape(*lead, -1)
    return run
