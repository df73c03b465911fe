"""Triton LeakyReLU: y = x if x ≥ 0 else α·x, elementwise, math in float32 (fp32/fp16/bf16 storage).

Memory traffic: one read and one write per element (2·n·itemsize bytes).
"""

import triton
import triton.language as tl


@triton.jit
def leaky_relu_kernel(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = tl.where(x >= 0.0, x, x * alpha)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def launch(x, out, alpha: float, block: int = 1024, num_warps: int = 4) -> None:
    n = x.numel()
    if n:
        leaky_relu_kernel[(triton.cdiv(n, block),)](x, out, n, float(alpha), BLOCK=block, num_warps=num_warps)
