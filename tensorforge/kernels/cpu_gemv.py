"""Tactic: MatMulEpilogue with a handful of rows (a GEMV, M ≤ 8) on the CPU: one MKL call with the bias in it, then
the activation as ONE fused in-place torch kernel.

    y = act(x · Wᵀ + bias [+ residual]) [+ residual]      x (…, K) with M = x.numel() / K ≤ 8 rows, W (N, K) or (K, N)

At M = 1 the whole cost is streaming W once (N·K·4 bytes) plus each call's fixed costs. The other CPU tactics pay
fixed costs that dominate there: oneDNN's linear sets a primitive up per call (16–25 µs for any SE-block FC of
MobileNetV3, hot), MKL's packed path re-checks its packing, and the generic epilogue (torch_fused.activation_)
writes HardSwish as four passes and HardSigmoid as three. Here: `addmm` (MKL sgemv on the weight as stored, no
packing, no copy of W), then relu_ / sigmoid_ / tanh_ / F.hardsigmoid / F.hardswish / F.silu / leaky_relu_ /
clamp_ in place — one pass over y. Measured in MobileNetV3-Large b1 (2 threads, in the network, medians of 20
calls): its 18 M = 1 MatMulEpilogue layers 1.115 ms with the previously chosen tactics, 0.802 ms this way.
Traffic: W once, x and the bias once, y (M·N values) written once and rewritten in place by the activation and
residual — negligible beside W at M ≤ 8.
Taken: float32, a 2-D weight, scale 1, an activation with a one-kernel torch form (HardSigmoid only as ONNX's
α = 1/6, β = ½, which is torch's hardsigmoid), a residual of y's shape after broadcasting. Everything else is
refused with its reason (supports() / fits()), and a kernel handed such operands raises; it never falls back.
Chosen by timing on the CPU (priority below oneDNN's and MKL's linear, so untimed builds are unchanged).
"""

import torch
import torch.nn.functional as F

from .cpu_onednn import bias_length_reason, refuse
from .registry import tactic
from .torch_fused import epilogue_attrs, epilogue_operands

MAX_ROWS = 8

_ONE_KERNEL = {
    "none": lambda y, a, b: y,
    "Relu": lambda y, a, b: y.relu_(),
    "Sigmoid": lambda y, a, b: y.sigmoid_(),
    "Tanh": lambda y, a, b: y.tanh_(),
    "HardSigmoid": lambda y, a, b: F.hardsigmoid(y, inplace=True),
    "HardSwish": lambda y, a, b: F.hardswish(y, inplace=True),
    "Silu": lambda y, a, b: F.silu(y, inplace=True),
    "LeakyRelu": lambda y, a, b: F.leaky_relu_(y, a),
    "Clip": lambda y, a, b: y.clamp_(a, b),
}


def act_reason(act: str, alpha: float, beta: float) -> str | None:
    """Why `act` has no one-kernel in-place torch form here, else None."""
    if act not in _ONE_KERNEL:
        return f"activation {act} has no one-kernel in-place torch form here"
    if act == "HardSigmoid" and (abs(alpha - 1 / 6) > 1e-6 or beta != 0.5):
        return f"HardSigmoid α {alpha}, β {beta}: torch's hardsigmoid is ONNX's α = 1/6, β = ½ only"
    return None


def operand_reason(layer, inputs) -> str | None:
    """Why the opt-point operands are not a GEMV this tactic runs, else None."""
    a, b = inputs[0], inputs[1] if len(inputs) > 1 else None
    if a is None or b is None:
        return None
    if b.dim() != 2:
        return f"a batched ({b.dim()}-D) weight: the GEMV takes one 2-D weight"
    if a.dtype != torch.float32 or b.dtype != torch.float32:
        return f"operands {a.dtype} · {b.dtype}: this tactic runs float32"
    trans_b = bool(int(layer.attrs.get("trans_b", 0)))
    k = a.shape[-1] if a.dim() else 0
    rows = a.numel() // max(k, 1)
    if rows > MAX_ROWS:
        return f"{rows} rows: a GEMM, not a GEMV (this tactic takes M ≤ {MAX_ROWS})"
    why = bias_length_reason(b, trans_b, inputs[2] if len(inputs) > 2 else None, "a bias")
    if why is not None:
        return why
    residual = inputs[3] if len(inputs) > 3 else None
    if residual is not None:
        n = b.shape[0] if trans_b else b.shape[1]
        out = (*a.shape[:-1], n)
        if tuple(torch.broadcast_shapes(out, residual.shape)) != out:
            return f"residual {tuple(residual.shape)} broadcasts y {out} to a larger shape (added in place here)"
    return None


@tactic("MatMulEpilogue", name="cpu_gemv", priority=4)
class CpuGemvMatMulEpilogue:
    @staticmethod
    def supports(layer, device):
        if device.type != "cpu":
            return "the MKL GEMV is a CPU tactic"
        if layer.precision not in (None, "float32"):
            return f"a {layer.precision} layer (this tactic runs float32)"
        if float(layer.attrs.get("scale", 1.0)) != 1.0:
            return f"scale {layer.attrs.get('scale')} ≠ 1 (addmm has no output scale here)"
        act, alpha, beta, _ = epilogue_attrs(layer.attrs)
        return act_reason(act, alpha, beta)

    @staticmethod
    def fits(layer, cfg, inputs):
        return operand_reason(layer, inputs)

    @staticmethod
    def build(layer, cfg, device):
        act, alpha, beta, res_first = epilogue_attrs(layer.attrs)
        trans_b = bool(int(layer.attrs.get("trans_b", 0)))
        activation = _ONE_KERNEL[act]

        def run(inputs):
            why = operand_reason(layer, inputs)
            if why is not None:
                refuse(layer, "cpu_gemv", why)
            a, b, bias, residual = epilogue_operands(inputs)
            w = b.t() if trans_b else b                       # (K, N), a view: MKL reads W as stored
            x = a.reshape(-1, a.shape[-1])
            y = torch.addmm(bias.reshape(-1), x, w) if bias is not None else torch.mm(x, w)
            y = y.view(*a.shape[:-1], y.shape[-1])
            if residual is not None and res_first:
                y.add_(residual)
            y = activation(y, alpha, beta)
            if residual is not None and not res_first:
                y.add_(residual)
            return [y]
        return run
