"""Triton GELU: y = ½·x·(1 + erf(x/√2)), or the tanh form ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).

One program handles BLOCK contiguous elements; math in float32 whatever the storage type (fp32/fp16/bf16).
Memory traffic: one read and one write per element (2·n·itemsize bytes); no intermediate reaches memory.
"""

import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, APPROX_TANH: tl.constexpr, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if APPROX_TANH:
        u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        t = 1.0 - 2.0 / (tl.exp(2.0 * u) + 1.0)          # tanh(u), saturates to ±1 without NaN
        y = 0.5 * x * (1.0 + t)
    else:
        y = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, out, approximate: str, block: int = 1024, num_warps: int = 4) -> None:
    """out ← gelu(x); x and out contiguous, same shape."""
    n = x.numel()
    if n == 0:
        return
    grid = (triton.cdiv(n, block),)
    gelu_kernel[grid](x, out, n, APPROX_TANH=approximate == "tanh", BLOCK=block, num_warps=num_warps)
