"""Tactics: MatMulEpilogue and Gemm on the CPU through oneDNN's linear with a pre-packed weight.

    y = act(x · Wᵀ + bias) [+ residual]        one oneDNN primitive: the GEMM with bias and activation as post-ops

The weight is reordered once per context into oneDNN's blocked layout (`_reorder_linear_weight`), so each call
streams it in the order the micro-kernel reads it; torch's addmm (MKL sgemm on the plain layout) plus separate
activation and residual kernels is 2× slower at the sizes of small models on 2 cores (32×256·256×1024: 0.10 ms
against 0.05 ms). Traffic: x, the packed W and the bias once, y once (plus the residual, read in the add).
Cases oneDNN cannot fuse run the op's torch path instead, inside the same tactic and documented here: a batched
(3-D) weight, scale ≠ 1, a residual added before the activation, float16 inputs, and an activation without a
oneDNN post-op (Elu, HardSigmoid other than ONNX's 1/6, ½ form). CPU builds pick it untimed (priority above
torch_addmm); it applies only to CPU devices whose torch has oneDNN.
Convolution through oneDNN's packed kernels was measured too (3→16 and 16→32 channels at 64²: 0.033/0.041 ms
against torch's 0.055/0.081 ms) and left out: its per-channel blocking rounds channels differently, which flips
the softmax of ONNX's constant-weight light_squeezenet (logits 6.8e9, fp32 spacing 512) away from the uniform
result onnxruntime and torch's convolution give.
"""

import torch

from ..ir import get_spec
from .registry import tactic
from .torch_fused import epilogue_attrs, epilogue_operands

_DTYPES = (torch.float32, torch.bfloat16)


def _post_op(act: str, alpha: float, beta: float) -> tuple[str, list, str] | None:
    """(oneDNN unary attr, scalars, algorithm) of an epilogue activation, or None when it has no post-op."""
    simple = {"none": "none", "Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "HardSwish": "hardswish",
              "Silu": "swish"}
    if act in simple:
        return simple[act], [], ""
    if act == "Gelu":
        return "gelu", [], "tanh" if alpha == 1 else "none"
    if act == "LeakyRelu":
        return "leaky_relu", [alpha], ""
    if act == "Clip":
        return "hardtanh", [alpha, beta], ""
    if act == "HardSigmoid" and abs(alpha - 1 / 6) < 1e-6 and beta == 0.5:
        return "hardsigmoid", [], ""
    return None


def onednn_reason(device) -> str | None:
    if device.type != "cpu":
        return "oneDNN's packed linear is a CPU tactic"
    if not torch.backends.mkldnn.is_available() or not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        return "this torch build has no oneDNN linear"
    return None


class _PackedWeight:
    """The weight as oneDNN's linear wants it — (N, K), reordered — once per weight tensor seen (a context's
    weights do not change); `trans`: the stored weight is already (N, K), else (K, N)."""

    def __init__(self, trans: bool):
        self.trans, self.seen, self.packed, self.n = trans, None, None, 0
        self.bias_seen, self.bias_value = None, None

    def bias(self, c: torch.Tensor, make) -> torch.Tensor:
        """make(c) once per bias tensor seen (Gemm's β·C broadcast to N values): not redone every call."""
        if self.bias_seen is not c:
            self.bias_seen, self.bias_value = c, make(c)
        return self.bias_value

    def __call__(self, w: torch.Tensor, rows: int) -> torch.Tensor:
        if self.seen is not w:
            w_nk = (w if self.trans else w.t()).contiguous()
            self.seen, self.n = w, w_nk.shape[0]
            self.packed = torch.ops.mkldnn._reorder_linear_weight(w_nk, max(1, rows))
        return self.packed


def linear_(x, w, bias, post, residual, pack: _PackedWeight):
    """oneDNN linear: post-op activation, then the residual added (fused as a binary post-op when no activation)."""
    attr, scalars, algorithm = post
    x = x.contiguous()
    w = pack(w, x.numel() // max(1, x.shape[-1]))
    bias = bias.reshape(-1).to(x.dtype).contiguous() if bias is not None else None
    if residual is not None and attr == "none" and residual.shape == (*x.shape[:-1], pack.n):
        return torch.ops.mkldnn._linear_pointwise.binary(x, residual.to(x.dtype).contiguous(), w, bias, "add")
    y = torch.ops.mkldnn._linear_pointwise(x, w, bias, attr, scalars, algorithm)
    return y.add_(residual) if residual is not None else y


@tactic("MatMulEpilogue", name="onednn_linear", priority=20)
class OneDnnMatMulEpilogue:
    @staticmethod
    def supports(layer, device):
        return onednn_reason(device)

    @staticmethod
    def build(layer, cfg, device):
        a_ = layer.attrs
        trans_b, scale = int(a_.get("trans_b", 0)), float(a_.get("scale", 1.0))
        act, alpha, beta, res_first = epilogue_attrs(a_)
        post = _post_op(act, alpha, beta)
        reference = get_spec("MatMulEpilogue").reference
        pack = _PackedWeight(trans=bool(trans_b))

        def run(inputs):
            a, b, bias, residual = epilogue_operands(inputs)
            fused = (post is not None and b.dim() == 2 and scale == 1.0 and a.dtype in _DTYPES and b.dtype == a.dtype
                     and not (residual is not None and res_first and act != "none"))
            if not fused:     # the cases listed in the module docstring: the op's own torch computation
                return [reference(*inputs, **a_)]
            return [linear_(a, b, bias, post, residual, pack)]
        return run


@tactic("Gemm", name="onednn_linear", priority=20)
class OneDnnGemm:
    """Gemm(A, B, C) with transA = 0, α = 1 and C a bias of N values (β·C folded at the first call)."""

    @staticmethod
    def supports(layer, device):
        why = onednn_reason(device)
        if why is None and (layer.attrs.get("transA", 0) or float(layer.attrs.get("alpha", 1.0)) != 1.0):
            why = "transA = 1 or α ≠ 1 (oneDNN's linear computes x · Wᵀ + bias)"
        return why

    @staticmethod
    def build(layer, cfg, device):
        a_ = layer.attrs
        trans_b, beta = int(a_.get("transB", 0)), float(a_.get("beta", 1.0))
        reference = get_spec("Gemm").reference
        pack = _PackedWeight(trans=bool(trans_b))
        none = _post_op("none", 0.0, 0.0)

        def run(inputs):
            a, b = inputs[0], inputs[1]
            c = inputs[2] if len(inputs) > 2 else None
            n = b.shape[0] if trans_b else b.shape[1]
            if a.dtype not in _DTYPES or b.dtype != a.dtype or (c is not None and c.numel() not in (1, n)):
                return [reference(*inputs, **a_)]
            bias = pack.bias(c, lambda t: (t.reshape(-1).expand(n) * beta).contiguous()) \
                if c is not None and beta != 0 else None
            return [linear_(a, b, bias, none, None, pack)]
        return run

