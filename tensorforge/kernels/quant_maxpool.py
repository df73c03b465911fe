"""Tactic: 2-D MaxPool on int8/uint8 codes (passes/rules/qdq_pool.py moves the pools of quantized networks
there) as one Triton kernel, channels-last out.

    y[n, c, p] = max_q x[n, c, p·s + q·d − pad_begin],   taps outside x read as the type's minimum
                 (−128 or 0: the code of −∞, so the result equals the float pool of the dequantized values)
Program (pixel block, channel block) loops over the kh·kw taps (unrolled), each a masked load of BLOCK_P × BLOCK_C
codes at x's own strides (NHWC from a quantized conv: the channel run is contiguous), keeping the running max
in registers. Traffic: x read once per overlapping window (from L2 after the first), y written once, 1 byte each —
a quarter of the fp16 pool plus the standalone Q it replaces. Output: (N, C, OH, OW) as a view of NHWC memory.
Entry points: tactic `maxpool.triton_int8`, launcher `max_pool_int8` (tests run it under TRITON_INTERPRET=1).
"""

import torch
import triton
import triton.language as tl

from ..ir.ops.nn_common import window_geometry
from .registry import tactic, triton_device_reason

CONFIGS = [{"BLOCK_P": 32, "BLOCK_C": 64, "warps": 4}, {"BLOCK_P": 64, "BLOCK_C": 32, "warps": 4},
           {"BLOCK_P": 16, "BLOCK_C": 128, "warps": 4}]
_MIN = {torch.int8: -128, torch.uint8: 0}


@triton.jit
def _maxpool_kernel(X, Y, P, C, H, W, OH, OW, sxn, sxc, sxh, sxw, sh, sw, ph, pw, dh, dw,
                    LO: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    rp = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    rc = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    n = rp // (OH * OW)
    oh = (rp % (OH * OW)) // OW
    ow = rp % OW
    ok = (rp < P)[:, None] & (rc < C)[None, :]
    base = X + n.to(tl.int64)[:, None] * sxn + rc[None, :].to(tl.int64) * sxc
    acc = tl.full((BLOCK_P, BLOCK_C), LO, tl.int32)
    for i in tl.static_range(KH):
        ih = oh * sh - ph + i * dh
        for j in tl.static_range(KW):
            iw = ow * sw - pw + j * dw
            inside = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            v = tl.load(base + (ih * sxh + iw * sxw)[:, None], mask=ok & inside[:, None], other=LO)
            acc = tl.maximum(acc, v.to(tl.int32))
    tl.store(Y + rp[:, None].to(tl.int64) * C + rc[None, :], acc.to(Y.dtype.element_ty), mask=ok)


def pool_reason(layer) -> str | None:
    a = layer.attrs
    ks = a.get("kernel_shape") or []
    if len(ks) != 2:
        return f"kernel_shape {ks}: the int8 kernel pools 2-D"
    if len(layer.outputs) != 1:
        return "MaxPool with Indices runs on the reference"
    return None


def max_pool_int8(x: torch.Tensor, attrs: dict, cfg: dict | None = None) -> torch.Tensor:
    """MaxPool (ONNX attributes, 2-D) of int8/uint8 x (N, C, H, W), any strides; returns an NHWC-memory view."""
    cfg = {**CONFIGS[0], **(cfg or {})}
    if x.dtype not in _MIN or x.dim() != 4:
        raise ValueError(f"max_pool_int8 takes a 4-D int8/uint8 tensor, got {x.dim()}-D {x.dtype}")
    n, c, h, w = x.shape
    out, begin, _, _ = window_geometry([h, w], attrs["kernel_shape"], attrs.get("strides"), attrs.get("dilations"),
                                       attrs.get("pads"), attrs.get("auto_pad", "NOTSET"), attrs.get("ceil_mode", 0))
    oh, ow = out
    sh, sw = (attrs.get("strides") or (1, 1))
    dh, dw = (attrs.get("dilations") or (1, 1))
    y = torch.empty((n, oh, ow, c), dtype=x.dtype, device=x.device)
    p = n * oh * ow
    if y.numel():
        grid = (triton.cdiv(p, cfg["BLOCK_P"]), triton.cdiv(c, cfg["BLOCK_C"]))
        _maxpool_kernel[grid](x, y, p, c, h, w, oh, ow, x.stride(0), x.stride(1), x.stride(2), x.stride(3),
                              sh, sw, begin[0], begin[1], dh, dw, LO=_MIN[x.dtype],
                              KH=int(attrs["kernel_shape"][0]), KW=int(attrs["kernel_shape"][1]),
                              BLOCK_P=cfg["BLOCK_P"], BLOCK_C=cfg["BLOCK_C"], num_warps=cfg["warps"])
    return y.permute(0, 3, 1, 2)


def _fits(layer, cfg, inputs):
    x = inputs[0]
    return None if x.dtype in _MIN and x.dim() == 4 else f"{x.dtype} {x.dim()}-D input: the kernel pools int8 codes"


@tactic("MaxPool", name="triton_int8", configs=CONFIGS, priority=-120)
class TritonMaxPoolInt8:
    """Below the reference: runs where tactics are timed (CUDA), after fits() has seen an int8/uint8 input."""
    supports = staticmethod(lambda layer, device: triton_device_reason(device) or pool_reason(layer))
    fits = staticmethod(_fits)

    @staticmethod
    def build(layer, cfg, device):
        def run(inputs):
            return [max_pool_int8(inputs[0], layer.attrs, cfg)]
        return run
