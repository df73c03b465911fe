"""Linear algebra ops: MatMul (numpy semantics), Gemm (α·A'·B' + β·C) and Einsum.

All three call torch's matrix kernels (cuBLAS on CUDA, MKL/oneDNN on CPU). For an (M×K)·(K×N) product
the traffic is M·K + K·N reads and M·N writes, against 2·M·N·K flops; batch dims broadcast as in numpy.
"""

import torch

from .nn_common import nn_op


@nn_op("MatMul")
def matmul(a, b):
    """numpy.matmul: 1-D operands gain (and lose) a unit dim; leading dims broadcast. y = a @ b."""
    return torch.matmul(a, b)


@nn_op("Gemm")
def gemm(a, b, c=None, *, alpha=1.0, beta=1.0, transA=0, transB=0):
    """Y = α · A' · B' + β · C, with A' = Aᵀ if transA, B' = Bᵀ if transB; C (optional) broadcasts to (M, N).

    Floating-point operands go to one fused addmm call (the GEMM epilogue applies α, β and C, so C is read
    once and no (M, N) temporary is written). Traffic: M·K + K·N + |C| reads, M·N writes.
    """
    a = a.t() if transA else a
    b = b.t() if transB else b
    if c is not None and beta != 0 and a.dtype.is_floating_point:
        return torch.addmm(c.to(a.dtype), a, b, beta=beta, alpha=alpha)
    y = a @ b
    if alpha != 1:
        y = (y * alpha).to(y.dtype)
    if c is not None and beta != 0:
        y = y + (c * beta).to(y.dtype)
    return y


@nn_op("Einsum")
def einsum(*operands, equation):
    """Einstein summation in explicit form ('ij,jk->ik'; the importer makes implicit forms explicit):
    y[out] = Σ over the letters missing from `out` of ∏ operands[terms]. torch.einsum contracts pairwise
    through batched GEMMs; traffic is that of the GEMMs plus any transposed copies they need."""
    return torch.einsum(equation, *operands)
