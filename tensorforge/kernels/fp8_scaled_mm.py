"""Tactic: FP8 E4M3 QuantizedMatMul / QuantizedConv as `torch._scaled_mm` (cuBLASLt FP8 GEMM on Hopper), with
unit tensor-wise scales and a float32 result, then the op's epilogue in torch ops (ir.ops.quantized.requantize).

acc (M, N) = A (M, K) · Bᵀ in float32 (fp8 products are exact in fp32; only the summation order differs from
the reference's float64 sum rounded once). B (N, K) row-major is the column-major (K, N) operand cuBLASLt
requires; K and N are zero-padded to multiples of 16. Traffic: A, B once (1 byte/elem), acc 4 bytes/elem
written and read by the epilogue, output once — the Triton fp8 kernel (triton_int8_gemm.py) skips the acc trip.
"""

import torch

from .quant_gemm import GEMM_OPS, gemm_layer_reason, make_gemm_kernel
from .registry import tactic


def scaled_mm(a8: torch.Tensor, b8: torch.Tensor) -> torch.Tensor:
    (m, k), n = a8.shape, b8.shape[0]
    pk, pn = -k % 16, -n % 16
    if pk:
        a8 = torch.nn.functional.pad(a8.view(torch.uint8), (0, pk)).view(a8.dtype)
    if pk or pn:
        b8 = torch.nn.functional.pad(b8.view(torch.uint8), (0, pk, 0, pn)).view(b8.dtype)
    one = torch.ones((), dtype=torch.float32, device=a8.device)
    return torch._scaled_mm(a8.contiguous(), b8.t(), scale_a=one, scale_b=one, out_dtype=torch.float32)[:, :n]


@tactic(GEMM_OPS[0], name="cublaslt_fp8", priority=15)
class ScaledMMFp8:
    @staticmethod
    def supports(layer, device):
        why = gemm_layer_reason(layer)
        if why:
            return why
        if layer.attrs.get("x_dtype") != "float8_e4m3fn":
            return f"{layer.attrs.get('x_dtype')} activations: this is the fp8 GEMM"
        if device.type != "cuda":
            return "torch._scaled_mm runs on CUDA"
        if torch.cuda.get_device_capability(device) < (8, 9):
            return "fp8 GEMMs need compute capability 8.9 or newer"
        return None

    @staticmethod
    def build(layer, cfg, device):
        return make_gemm_kernel(layer, device, scaled_mm)


for _op in GEMM_OPS[1:]:
    tactic(_op, name="cublaslt_fp8", priority=15)(type(f"ScaledMMFp8_{_op}", (ScaledMMFp8,), {}))
