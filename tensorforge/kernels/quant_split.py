"""Split-K planning for the quantized Triton GEMM (triton_int8_gemm.py): how many K splits a problem gets, and
whether a split config is worth compiling at a layer's shapes. No kernel here.

Split-K runs S programs per output tile, each summing a K range into a partial; it pays where the
⌈M/BM⌉·⌈N/BN⌉ output tiles leave most multiprocessors idle — batch 1: resnet50's 14×14 and 7×7 stages (8–32
tiles of 64×64), BERT-base at 128 tokens (24–72).
"""

import torch
from triton import cdiv as _cdiv

from ..util import device as _device
from .quant_gemm import conv_geometry
from .triton_gemm import output_tiles, persistent_reason

MAX_SPLITS = 16
INTERPRETED_SMS = 8         # the "device" split_plan sizes for under TRITON_INTERPRET=1 (CPU tests)


def sm_count(device) -> int:
    """Streaming multiprocessors split_plan fills: the CUDA device's, INTERPRETED_SMS under the interpreter."""
    return _device.sm_count(device, INTERPRETED_SMS)


def split_plan(m: int, n: int, k: int, cfg: dict, sms: int) -> tuple[int, int]:
    """(S, KSPLIT) for split-K: an m×n×k problem whose ⌈m/BM⌉·⌈n/BN⌉ output tiles leave most of the `sms`
    multiprocessors idle runs S programs per tile, each summing KSPLIT columns (a multiple of BK) into an int32
    (fp8: float32) partial; a second pass sums the S partials and runs the epilogue. S = min(⌈sms / tiles⌉,
    K blocks, MAX_SPLITS), with every split non-empty. Extra traffic: 8·S bytes per output element (partials
    written, then read). (1, k): no split."""
    tiles = output_tiles(m, n, cfg)
    kblocks = _cdiv(k, cfg["BK"])
    want = min(kblocks, MAX_SPLITS, _cdiv(sms, max(tiles, 1)))
    if want <= 1:
        return 1, k
    ksplit = _cdiv(kblocks, want) * cfg["BK"]
    return _cdiv(k, ksplit), ksplit


def gemm_dims(layer, inputs) -> tuple[int, int, int] | None:
    """(M, N, K) of a QuantizedMatMul / QuantizedConv's GEMM at these inputs (x, w), None when not tensors."""
    x, w = inputs[0], inputs[1]
    if not isinstance(x, torch.Tensor) or not isinstance(w, torch.Tensor):
        return None
    if layer.op == "QuantizedConv":
        m = conv_geometry(x, w.shape, layer.attrs, 0)["M"]
        return m, w.shape[0], w[0].numel()
    return x.numel() // max(x.shape[-1], 1), w.shape[0], w.shape[1]


def split_fits(layer, cfg, inputs) -> str | None:
    """Why a split-K or persistent config is not worth compiling at these shapes: a split-K plan of one split
    (then it is its unsplit twin, which is timed anyway), or a persistent loop over no more output tiles than
    multiprocessors (then each program takes one tile: the one-tile-per-program TMA kernel)."""
    if not cfg.get("SPLIT") and not cfg.get("PERSIST"):
        return None
    dims = gemm_dims(layer, inputs)
    if dims is None:
        return None
    sms = sm_count(inputs[0].device)
    if cfg.get("PERSIST"):
        return persistent_reason(dims[0], dims[1], cfg, sms)
    if split_plan(*dims, cfg, sms)[0] <= 1:
        m, n, _ = dims
        return (f"split-K not needed: {output_tiles(m, n, cfg)} output tiles for {sms} "
                "multiprocessors")
    return None
