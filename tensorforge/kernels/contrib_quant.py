"""Tactics for onnxruntime's quantized contrib ops (ir/ops/contrib_quant.py): QGemm and DynamicQuantizeLSTM with
their integer GEMMs as `torch._int_mm` (int8 × int8 → int32: oneDNN on the CPU, cuBLASLt IMMA on CUDA, padded as
for QuantizedMatMul), bit-exact to the references, which sum the same integers in float64.

uint8 operands become int8 by v − 128 (zero point z − 128), and the zero points are corrected in int32:
    Σ_k (a − za)(b − zb) = Σ a'b' − za'·Σ_k b' − zb'·Σ_k a' + K·za'·zb'          (a' = a − 128 …)
Weights are converted (and transposed to the (N, K) operand) once per weight tensor. Zero points stay device
tensors (no host sync), so the kernels can be captured in CUDA graphs. Traffic: QGemm reads A and B once,
writes the int32 accumulator once and Y once; the LSTM does one (S·B, I)×(I, 4H) GEMM and S (B, H)×(H, 4H) GEMMs.
"""

import torch

from ..ir.ops.contrib_quant import qgemm_epilogue, qgemm_multiplier, run_dynamic_quantize_lstm
from .quant_common import as_int8
from .quant_int_mm import _int_mm
from .registry import tactic


def _int8_zp(z: torch.Tensor, was_uint8: bool) -> torch.Tensor:
    z = z.to(torch.int32).reshape(-1)
    return z - 128 if was_uint8 else z


def int_matmul(a8: torch.Tensor, za: torch.Tensor, b8: torch.Tensor, zb: torch.Tensor) -> torch.Tensor:
    """Σ_k (a8 − za)(b8[n] − zb[n]) in int32: a8 (M, K), b8 (N, K) int8; za (1,), zb (1,) or (N,) int32."""
    k = a8.shape[1]
    acc = _int_mm(a8, b8)
    acc = acc - za * b8.to(torch.int32).sum(1)[None, :]
    acc = acc - a8.to(torch.int32).sum(1, keepdim=True) * zb[None, :] + k * za * zb[None, :]
    return acc


class _Prepared:
    """Weights as the int8 (N, K) GEMM operand, rebuilt only when the tensor changes."""

    def __init__(self):
        self._key, self._value = None, None

    def get(self, w: torch.Tensor, transpose: bool) -> torch.Tensor:
        key = (w.data_ptr(), w._version, w.device)
        if key != self._key:
            self._value = as_int8(w.t() if transpose else w).contiguous()
            self._key = key
        return self._value


def _device_reason(device) -> str | None:
    return None if device.type in ("cpu", "cuda") else f"no _int_mm on {device.type}"


@tactic("QGemm", name="torch_int_mm", priority=10)
class QGemmIntMM:
    supports = staticmethod(lambda layer, device: _device_reason(device))

    @staticmethod
    def build(layer, cfg, device):
        a_attr = layer.attrs
        weights = _Prepared()

        def run(inputs):
            a, a_scale, a_zp, b, b_scale, b_zp = inputs[:6]
            c, y_scale, y_zp = (list(inputs[6:]) + [None] * 3)[:3]
            a2 = a.t() if a_attr.get("transA", 0) else a
            b8 = weights.get(b, not a_attr.get("transB", 0))            # (N, K)
            acc = int_matmul(as_int8(a2).contiguous(), _int8_zp(a_zp, a.dtype == torch.uint8), b8,
                             _int8_zp(b_zp, b.dtype == torch.uint8))
            if c is not None:
                acc = acc + c.to(torch.int32)
            return [qgemm_epilogue(acc, qgemm_multiplier(a_scale, b_scale, y_scale, a_attr.get("alpha", 1.0)), y_zp)]
        return run


@tactic("DynamicQuantizeLSTM", name="torch_int_mm", priority=10)
class DynamicQuantizeLSTMIntMM:
    supports = staticmethod(lambda layer, device: _device_reason(device))

    @staticmethod
    def build(layer, cfg, device):
        prepared: dict[int, _Prepared] = {}

        def imatmul(aq, a_zp, w, w_zp):
            """aq (M, K) float64 in [0, 255] with zero point a_zp; w (K, N) 8-bit with float64 zero points."""
            b8 = prepared.setdefault(w.data_ptr(), _Prepared()).get(w, True)
            a8 = (aq.to(torch.int16) - 128).to(torch.int8)
            za = a_zp.to(torch.int32).reshape(1) - 128
            zb = w_zp.to(torch.int32).reshape(-1) - (128 if w.dtype == torch.uint8 else 0)
            return int_matmul(a8, za, b8, zb)

        def run(inputs):
            return list(run_dynamic_quantize_lstm(inputs, layer.attrs, imatmul))[:len(layer.outputs)]
        return run
