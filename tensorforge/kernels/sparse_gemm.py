"""Tactics of SparseGemm (y = x·Wᵀ + b, W [N, K] with the 2:4 pattern): semi-structured sparse and dense.

- `torch_semi_structured` (CUDA, float16/bfloat16): W is compressed once per kernel with
  torch.sparse.to_sparse_semi_structured (cuSPARSELt, else CUTLASS): half of W's values plus 2-bit indices,
  so the GEMM reads ~56 % of the weight bytes and the sparse tensor cores skip the zero products; x is viewed as
  [M, K]. A shape the sparse kernels refuse fails the tactic's trial run, and the dense tactic is chosen.
- `dense` (every device): F.linear on the dense W, the baseline the sparse tactic is timed against.
"""

import torch

from .registry import tactic

_HALF = ("float16", "bfloat16")


def _linear(x, w, b):
    return torch.nn.functional.linear(x, w, b)


@tactic("SparseGemm", name="torch_semi_structured", priority=5)
class SemiStructured:
    @staticmethod
    def supports(layer, device):
        if device.type != "cuda":
            return "2:4 semi-structured sparse GEMMs need a CUDA GPU with sparse tensor cores (cuSPARSELt/CUTLASS)"
        if layer.precision not in _HALF:
            return f"semi-structured sparse GEMMs here take float16/bfloat16, the layer computes in {layer.precision}"
        if not hasattr(torch.sparse, "to_sparse_semi_structured"):
            return "this torch has no torch.sparse.to_sparse_semi_structured"
        return None

    @staticmethod
    def build(layer, cfg, device):
        packed = {}

        def run(inputs):
            x, w = inputs[0], inputs[1]
            b = inputs[2] if len(inputs) > 2 else None
            key = (w.data_ptr(), w.dtype)
            if key not in packed:
                packed.clear()
                packed[key] = torch.sparse.to_sparse_semi_structured(w.contiguous())
            y = torch.nn.functional.linear(x.reshape(-1, x.shape[-1]), packed[key], b)
            return [y.reshape(*x.shape[:-1], w.shape[0])]
        return run


@tactic("SparseGemm", name="dense")
class Dense:
    @staticmethod
    def supports(layer, device):
        return None

    @staticmethod
    def build(layer, cfg, device):
        return lambda inputs: [_linear(inputs[0], inputs[1], inputs[2] if len(inputs) > 2 else None)]
