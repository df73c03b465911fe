"""Tactic: QuantizedMatMul / QuantizedConv as `torch._int_mm` (int8 × int8 → int32: cuBLASLt IMMA on CUDA,
oneDNN/ATen on the CPU) plus the reference epilogue in torch ops — bit-exact to the op's reference, since the
int32 accumulator is exact and the epilogue is the reference's own code.

acc (M, N) = A (M, K) · Bᵀ, B (N, K) stored row-major = a column-major (K, N) operand, as cuBLASLt wants it.
CUDA needs K and N multiples of 8 and M > 16 (zero padding makes them so). Convolutions go through
im2col (quant_common.im2col). Traffic: A, B once, acc (4 bytes/elem) written and read once by the epilogue,
output once — the Triton kernel (triton_int8_gemm.py) keeps acc in registers instead.
"""

import torch

from .quant_gemm import GEMM_OPS, gemm_layer_reason, make_gemm_kernel
from .registry import tactic


def _int_mm(a8: torch.Tensor, b8: torch.Tensor) -> torch.Tensor:
    """A·Bᵀ in int32; on CUDA, zero rows/columns pad M to > 16 and K, N to multiples of 8 (they add 0)."""
    (m, k), n = a8.shape, b8.shape[0]
    if a8.is_cuda:
        pk, pn = -k % 8, -n % 8
        if pk or m <= 16:
            a8 = torch.nn.functional.pad(a8, (0, pk, 0, max(0, 17 - m)))
        if pk or pn:
            b8 = torch.nn.functional.pad(b8, (0, pk, 0, pn))
    return torch._int_mm(a8.contiguous(), b8.t())[:m, :n]


def _supports(layer, device):
    why = gemm_layer_reason(layer)
    if why:
        return why
    if layer.attrs.get("x_dtype") not in ("int8", "uint8"):
        return f"{layer.attrs.get('x_dtype')} activations: _int_mm multiplies int8"
    if device.type not in ("cuda", "cpu"):
        return f"no _int_mm on {device.type}"
    return None


class _IntMM:
    supports = staticmethod(_supports)

    @staticmethod
    def build(layer, cfg, device):
        return make_gemm_kernel(layer, device, _int_mm)


for _op in GEMM_OPS:
    tactic(_op, name="torch_int_mm", priority=10)(type(f"IntMM_{_op}", (_IntMM,), {}))
