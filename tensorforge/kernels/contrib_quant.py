"""Tactics for onnxruntime's quantized contrib ops (ir/ops/contrib_quant.py): QGemm and DynamicQuantizeLSTM with
their integer GEMMs as `torch._int_mm` (int8 × int8 → int32: cuBLASLt IMMA on CUDA, padded as for QuantizedMatMul)
or as chunked float32 GEMMs of the centred values (`float_exact`, the CPU's choice: torch's CPU _int_mm is slower
than its float64 matmul), both bit-exact to the references, which sum the same integers in float64.

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


# ---- float_exact: the same integer sums as float32 GEMMs (oneDNN/MKL on the CPU, cuBLAS on CUDA) -----------------
# A centred 8-bit operand lies in [−255, 255], exact in float32, TF32 and bfloat16; a float32-accumulated sum of
# products stays an exact integer while Σ|a·b| < 2²⁴, so K is cut into chunks of ⌊2²⁴ / (255·max|b|)⌋
# (≥ 258; 514 for int8 weights) and the exact chunk results are added in float64.

def exact_chunk(b_centered: torch.Tensor) -> int:
    """The longest K-chunk whose float32 sums are exact for these centred weights (|a − za| ≤ 255)."""
    bmax = max(1, int(b_centered.abs().max().item()) if b_centered.numel() else 1)
    return max(1, (1 << 24) // (255 * bmax))


def float_exact_matmul(a_c: torch.Tensor, b_c: torch.Tensor, chunk: int) -> torch.Tensor:
    """Σ_k a_c[m, k]·b_c[k, n] exactly (float64 result): a_c (M, K), b_c (K, N) centred integers in float32."""
    k = a_c.shape[1]
    if k <= chunk:
        return torch.matmul(a_c, b_c).double()
    n_chunks = -(-k // chunk)
    pad = n_chunks * chunk - k
    a3 = torch.nn.functional.pad(a_c, (0, pad)).reshape(a_c.shape[0], n_chunks, chunk).transpose(0, 1)
    b3 = torch.nn.functional.pad(b_c, (0, 0, 0, pad)).reshape(n_chunks, chunk, b_c.shape[1])
    return torch.bmm(a3, b3).double().sum(0)


class _Centred:
    """Weights centred by their zero points as float32 (K, N), with their exact chunk, per weight tensor."""

    def __init__(self):
        self._key, self._value = None, None

    def get(self, w: torch.Tensor, zp: torch.Tensor, transpose: bool, zp_key):
        """zp_key identifies the zero points' source tensor (its data_ptr and version)."""
        key = (w.data_ptr(), w._version, w.device, zp_key)
        if key != self._key:
            wk = (w.t() if transpose else w).to(torch.float32)
            c = (wk - zp.to(w.device).to(torch.float32).reshape(-1 if zp.numel() > 1 else ())).contiguous()
            self._value, self._key = (c, exact_chunk(c)), key
        return self._value


@tactic("QGemm", name="float_exact", priority=12)
class QGemmFloatExact:
    supports = staticmethod(lambda layer, device: _device_reason(device))

    @staticmethod
    def build(layer, cfg, device):
        a_attr = layer.attrs
        weights = _Centred()

        def run(inputs):
            a, a_scale, a_zp, b, b_scale, b_zp = inputs[:6]
            c, y_scale, y_zp = (list(inputs[6:]) + [None] * 3)[:3]
            a2 = a.t() if a_attr.get("transA", 0) else a
            b_c, chunk = weights.get(b, b_zp, bool(a_attr.get("transB", 0)), (b_zp.data_ptr(), b_zp._version))
            a_c = a2.to(torch.float32) - a_zp.to(torch.float32).reshape(())
            acc = float_exact_matmul(a_c, b_c, chunk)
            if c is not None:
                acc = acc + c.to(torch.float64)
            return [qgemm_epilogue(acc, qgemm_multiplier(a_scale, b_scale, y_scale, a_attr.get("alpha", 1.0)), y_zp)]
        return run


@tactic("DynamicQuantizeLSTM", name="float_exact", priority=12)
class DynamicQuantizeLSTMFloatExact:
    supports = staticmethod(lambda layer, device: _device_reason(device))

    @staticmethod
    def build(layer, cfg, device):
        prepared: dict[int, _Centred] = {}
        zp_key: list = [None]          # the W / R zero-point inputs of the current call

        def imatmul(aq, a_zp, w, w_zp):
            """aq (M, K) float64 in [0, 255] with zero point a_zp; w (K, N) 8-bit with float64 zero points."""
            b_c, chunk = prepared.setdefault(w.data_ptr(), _Centred()).get(w, w_zp, False, zp_key[0])
            return float_exact_matmul((aq - a_zp).to(torch.float32), b_c, chunk)

        def run(inputs):
            zps = [inputs[i] for i in (9, 11)]
            zp_key[0] = tuple((z.data_ptr(), z._version) for z in zps)
            return list(run_dynamic_quantize_lstm(inputs, layer.attrs, imatmul))[:len(layer.outputs)]
        return run
