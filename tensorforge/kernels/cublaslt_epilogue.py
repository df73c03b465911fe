"""MatMulEpilogue with its bias and ReLU / tanh-GELU in cuBLASLt's GEMM epilogue: one kernel, no second pass.

Tactic `matmulepilogue.cublaslt_act`: `torch._addmm_activation(bias, a2, b, use_gelu=…)` on the 2-D view a2 of A,

    y = act(a2 @ b + bias),  act = relu          (CUBLASLT_EPILOGUE_RELU_BIAS)
                             or gelu_tanh(x) = ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))   (…_GELU_BIAS)

Traffic: read A, B, bias once, write y (M, N) once. torch_addmm (torch_fused.py) writes y from the GEMM, then
reads and writes it again in the activation's elementwise kernel: this saves one read + one write of (M, N) and a
launch (GPT-2 FC1 at batch 32, seq 128: M·N = 4096 × 3072 fp16, 2 × 25 MB, ≈ 17 µs a layer at 3 TB/s).

Numerics: cuBLASLt adds the bias and applies the activation to the fp32 accumulator before the one rounding to
fp16/bf16; addmm → round → gelu → round rounds twice. The result is within float rounding of the op's reference
(and if anything closer to the exact value). ATen runs the epilogue only when its conditions hold (1-D contiguous
bias of N values, beta = 1, fp16/bf16/fp32/fp64, both dims of both matrices > 1); otherwise it runs the GEMM then
relu_ / gelu_(approximate="tanh") itself — the same math, two passes. Timing decides, per shape, whether it wins.

No bias (GPT-2's Conv1D biases are zero at initialisation and exporters fold them away, as do bias-free MLPs):
the epilogues take one, so a zero vector of N values stands in, made once per layer, dtype and device (N reads
per output tile, nothing beside M·N); act(A·B + 0) = act(A·B) exactly, and the one rounding is kept.

CUDA only (supports() says why): on the CPU `_addmm_activation` is addmm then the activation — what torch_addmm
already runs — and its use_gelu applies the erf GELU there (ATen's CPU kernel calls gelu_ with its default), not
the tanh form. Tests build the kernel on the CPU directly; there the GELU runs as a separate tanh pass (below).
Refused with a reason: other activations, erf GELU (alpha ≠ 1), a residual, scale ≠ 1, unknown attributes;
fits() refuses a batched B, a bias that is not N values, and other dtypes.
"""

import torch
import torch.nn.functional as F

from .registry import tactic
from .torch_fused import epilogue_attrs, epilogue_operands, rows_in_memory_order

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_KNOWN_ATTRS = {"trans_b", "scale", "activation", "alpha", "beta", "residual_first"}   # beta: Clip/HardSigmoid only
USE_GELU = {"Relu": False, "Gelu": True}        # the epilogue per activation (use_gelu of _addmm_activation)


def _present(layer, k: int) -> bool:
    return len(layer.inputs) > k and bool(layer.inputs[k])


def addmm_activation(use_gelu: bool, device: torch.device):
    """f(bias, a2, b) = act(a2 @ b + bias). On CUDA torch._addmm_activation (cuBLASLt epilogue, or ATen's GEMM +
    tanh-GELU/ReLU fallback). Elsewhere (tests only) its ReLU path as is, and the tanh GELU as a second pass,
    since the CPU kernel's use_gelu computes the erf form."""
    if use_gelu and device.type != "cuda":
        return lambda bias, a2, b: F.gelu(torch.addmm(bias, a2, b), approximate="tanh")
    return lambda bias, a2, b: torch._addmm_activation(bias, a2, b, use_gelu=use_gelu)


def stand_in_bias(n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The bias a bias-free layer hands the RELU_BIAS / GELU_BIAS epilogue: N zeros."""
    return torch.zeros(n, dtype=dtype, device=device)


@tactic("MatMulEpilogue", name="cublaslt_act", priority=4)   # below torch_addmm (5): untimed builds keep that one
class CublasLtActEpilogue:
    @staticmethod
    def supports(layer, device):
        a_ = layer.attrs
        if device.type != "cuda":
            return ("cuBLASLt epilogues run on CUDA; on the CPU _addmm_activation is addmm then the activation "
                    "(torch_addmm), and its GELU is the erf form")
        unknown = sorted(set(a_) - _KNOWN_ATTRS)
        if unknown:
            return f"attributes {unknown} are not handled by this tactic"
        act, alpha, _, _ = epilogue_attrs(a_)
        if act not in USE_GELU:
            return f"cuBLASLt fuses ReLU and tanh-GELU only (this epilogue's activation: {act})"
        if act == "Gelu" and alpha != 1.0:
            return "Gelu in its erf form (alpha=0): cuBLASLt's GELU epilogue computes the tanh approximation only"
        if float(a_.get("scale", 1.0)) != 1.0:
            return f"scale {a_.get('scale')} ≠ 1"
        if _present(layer, 3):
            return "a residual input: cuBLASLt's activation epilogues add no second tensor"
        return None

    @staticmethod
    def fits(layer, cfg, inputs):
        a, b, bias, residual = epilogue_operands(inputs)
        if residual is not None:
            return "a residual input: cuBLASLt's activation epilogues add no second tensor"
        if b.dim() != 2:
            return f"B is {b.dim()}-D: a batched product, not one GEMM"
        if a.dim() < 1:
            return "A is a scalar"
        if a.dtype not in _DTYPES or b.dtype != a.dtype:
            return f"operands {a.dtype} · {b.dtype}: this tactic takes float16, bfloat16 or float32, both alike"
        n = b.shape[0] if int(layer.attrs.get("trans_b", 0)) else b.shape[1]
        if bias is not None and bias.numel() != n:
            return f"the bias has {bias.numel()} values, not one per column ({n})"
        return None

    @staticmethod
    def build(layer, cfg, device):
        trans_b = int(layer.attrs.get("trans_b", 0))
        act, _, _, _ = epilogue_attrs(layer.attrs)
        fused = addmm_activation(USE_GELU[act], device)
        kept: list = [None, None]           # the bias as given (None: none), and the vector the epilogue reads

        def run(inputs):
            a, b, bias, _ = epilogue_operands(inputs)
            if trans_b:
                b = b.transpose(-1, -2)
            return [product(a, b, bias, None)]

        @rows_in_memory_order
        def product(a, b, bias, _residual):
            if kept[1] is None or kept[0] is not bias or kept[1].dtype != a.dtype:      # once per engine
                kept[0] = bias
                kept[1] = (stand_in_bias(b.shape[-1], a.dtype, a.device) if bias is None
                           else bias.reshape(-1).to(a.dtype).contiguous())
            y = fused(kept[1], a.reshape(-1, a.shape[-1]), b)
            return y.reshape(*a.shape[:-1], b.shape[-1])
        return run
