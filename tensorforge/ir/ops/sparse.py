"""SparseGemm: y = x · Wᵀ (+ b) for a constant weight W [N, K] with the 2:4 pattern along K (--sparsity).

The builder (builder/sparsity.py) rewrites a Gemm/MatMul whose constant weight has at most two non-zeros in every
group of four consecutive K elements into this op; its tactics (kernels/sparse_gemm.py) are the semi-structured
sparse GEMM of the GPU's sparse tensor cores (half the weight bytes and multiply-adds) and a dense GEMM.
Reference: the dense product, F.linear(x, W, b). Traffic: x, W (dense here) and y once.
"""

import torch

from ..opspec import op


@op("SparseGemm")
def sparse_gemm(x, weight, bias=None):
    return torch.nn.functional.linear(x, weight.to(x.dtype), None if bias is None else bias.to(x.dtype))
