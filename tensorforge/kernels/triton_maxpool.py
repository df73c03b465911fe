"""Tactic: 2-D MaxPool of float16/bfloat16/float32 as one Triton kernel, channels-last out; the kernel and its
launcher also serve the int8/uint8 tactic (quant_maxpool.py).

    y[n, c, p] = max_q x[n, c, p·s + q·d − pad_begin],   taps outside x read as LO (−∞ for floats, −128 / 0
                 for int8 / uint8 codes): ceil_mode's last window, which may run past the edge, takes real taps only
Program (pixel block, channel block) loops over the kh·kw taps (unrolled), each a masked load of BLOCK_P × BLOCK_C
values at x's own strides, keeping the running max in x's own dtype (a max is exact in any dtype). NaN propagates
as in torch's max pool (tl.maximum with PropagateNan.ALL). Traffic: x read once (the overlapping 3×3/2 windows
re-read from L2), y written once: for the resnet50 stem at batch 32 (32·64·112·112 fp16 in NHWC) 51 MB in and
13 MB out. With NHWC x a row of BLOCK_C channels is one contiguous run; NCHW x is read at its strides (gathers).
Output: (N, C, OH, OW) as a view of NHWC memory. Entry points: tactic `maxpool.triton`, launcher `max_pool_2d`.
"""

import torch
import triton
import triton.language as tl

from ..ir.ops.nn_common import window_geometry
from .registry import tactic, triton_device_reason

CONFIGS = [{"BLOCK_P": 32, "BLOCK_C": 64, "warps": 4}, {"BLOCK_P": 64, "BLOCK_C": 64, "warps": 4},
           {"BLOCK_P": 128, "BLOCK_C": 64, "warps": 8}, {"BLOCK_P": 32, "BLOCK_C": 128, "warps": 4}]
LOWEST = {torch.float16: float("-inf"), torch.bfloat16: float("-inf"), torch.float32: float("-inf"),
          torch.int8: -128, torch.uint8: 0}
_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


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
    acc = tl.full((BLOCK_P, BLOCK_C), LO, Y.dtype.element_ty)
    for i in tl.static_range(KH):
        ih = oh * sh - ph + i * dh
        for j in tl.static_range(KW):
            iw = ow * sw - pw + j * dw
            inside = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            v = tl.load(base + (ih * sxh + iw * sxw)[:, None], mask=ok & inside[:, None], other=LO)
            acc = tl.maximum(acc, v, propagate_nan=tl.PropagateNan.ALL)     # NaN: floats only; ints ignore it
    tl.store(Y + rp[:, None].to(tl.int64) * C + rc[None, :], acc, mask=ok)


def pool_reason(layer) -> str | None:
    a = layer.attrs
    ks = a.get("kernel_shape") or []
    if len(ks) != 2:
        return f"kernel_shape {ks}: the Triton kernel pools 2-D"
    if len(layer.outputs) != 1:
        return "MaxPool with Indices runs on the reference"
    return None


def max_pool_2d(x: torch.Tensor, attrs: dict, cfg: dict) -> torch.Tensor:
    """MaxPool (ONNX attributes, 2-D; storage_order only orders Indices, not computed here) of a 4-D x of a
    dtype in LOWEST, any strides; returns (N, C, OH, OW) as a view of NHWC memory."""
    if x.dtype not in LOWEST or x.dim() != 4:
        raise ValueError(f"the Triton MaxPool takes a 4-D float16/bfloat16/float32/int8/uint8 tensor, "
                         f"got {x.dim()}-D {x.dtype}")
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
                              sh, sw, begin[0], begin[1], dh, dw, LO=LOWEST[x.dtype],
                              KH=int(attrs["kernel_shape"][0]), KW=int(attrs["kernel_shape"][1]),
                              BLOCK_P=cfg["BLOCK_P"], BLOCK_C=cfg["BLOCK_C"], num_warps=cfg["warps"])
    return y.permute(0, 3, 1, 2)


def max_pool_float(x: torch.Tensor, attrs: dict, cfg: dict | None = None) -> torch.Tensor:
    """max_pool_2d of a float16/bfloat16/float32 x (the float tactic's launcher)."""
    if x.dtype not in _FLOATS:
        raise ValueError(f"max_pool_float takes float16/bfloat16/float32, got {x.dtype}")
    return max_pool_2d(x, attrs, {**CONFIGS[0], **(cfg or {})})


def _fits(layer, cfg, inputs):
    x = inputs[0]
    if x.dtype not in _FLOATS or x.dim() != 4:
        return f"{x.dtype} {x.dim()}-D input: the kernel pools 4-D float16/bfloat16/float32"
    return None


@tactic("MaxPool", name="triton", configs=CONFIGS, priority=-120)
class TritonMaxPool:
    """Below the reference (-100): untimed builds keep torch's pool; timed builds (CUDA) compare measured times."""
    supports = staticmethod(lambda layer, device: triton_device_reason(device) or pool_reason(layer))
    fits = staticmethod(_fits)

    @staticmethod
    def build(layer, cfg, device):
        def run(inputs):
            return [max_pool_float(inputs[0], layer.attrs, cfg)]
        return run
