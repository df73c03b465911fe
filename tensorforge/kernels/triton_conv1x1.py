"""Tactic: a 1×1 convolution (stride 1, no padding, group 1) with its epilogue as ONE Triton GEMM on channels-last
rows.

    y[n, o, h, w] = act(Σ_c x[n, c, h, w]·W[o, c] + b[o] [+ r]) [+ r]   ≡   Y (N·H·W, O) = epi(X (N·H·W, C) · Wᵀ)

In channels-last memory the (N, C, H, W) activation is the row-major (N·H·W, C) matrix, so the convolution is the
MatMulEpilogue GEMM of triton_gemm.py on a view: bias, activation and residual in the accumulator's epilogue, one
launch, y written once. The cuDNN tactics run it as cuDNN's convolution without bias and then the Triton epilogue
pass (conv_epilogue: y written, read and written again), or cuDNN's fused conv + bias + ReLU where the activation is
ReLU. MobileNetV3-Large at batch 1 launched 36 epilogue kernels after cuDNN's convolutions (48.8 µs of its
283.9 µs of kernels on the H200; the profile does not say how many follow 1×1 ones). The output is y's rows seen as (N, O, H, W):
channels-last, as the NHWC conv tactics leave it. An input in NCHW memory is made channels-last first (one copy,
which timing counts). Configs: the GEMM's tile configs (triton_gemm.CONFIGS and TMA_CONFIGS), judged by its fits().
Entry points: tactics `fusedconv.triton_conv1x1`, `conv.triton_conv1x1`; the launcher `conv1x1_gemm`.
"""

import torch

from ..ir import Layer
from ..ir.ops.conv import pointwise_conv_reason
from .registry import tactic
from .torch_fused import epilogue_attrs, epilogue_operands
from .triton_conv_epilogue import _CudnnTritonEpilogue
from .triton_gemm import CONFIGS as GEMM_CONFIGS, TMA_CONFIGS, TritonGemmEpilogue, gemm_epilogue

# two mid-size pointer tiles, the skinny one (batch-1 late stages: 49 rows) and a Hopper TMA tile: MobileNetV3 /
# EfficientNet's 1×1 products are narrow (N 16–960); four configs, each one more compile per variant in a cold build
# ("layout": "nhwc": the output is channels-last, which network-context timing groups with the NHWC conv tactics)
CONFIGS = [{"layout": "nhwc", **c} for c in (GEMM_CONFIGS[1], GEMM_CONFIGS[3], GEMM_CONFIGS[6], TMA_CONFIGS[2])]


def pointwise_reason(layer, w_shape=None) -> str | None:
    """Why the layer is not a 1×1, stride-1, unpadded, ungrouped 2-D convolution (None when it is)."""
    return pointwise_conv_reason(layer.attrs, w_shape)


def channels_last_rows(t: torch.Tensor) -> torch.Tensor:
    """(N, C, H, W) as its channels-last (N·H·W, C) rows: a view when t is channels-last, else after one copy."""
    t = t.contiguous(memory_format=torch.channels_last)
    return t.permute(0, 2, 3, 1).reshape(-1, t.shape[1])


def conv1x1_gemm(x, w, bias=None, residual=None, activation="none", alpha=0.0, beta=0.0, residual_first=0,
                 cfg=None):
    """The 1×1 convolution through triton_gemm.gemm_epilogue on channels-last rows; returns (N, O, H, W) in
    channels-last memory."""
    n, c, h, wd = x.shape
    out_c = w.shape[0]
    res = None if residual is None else channels_last_rows(residual.expand(n, out_c, h, wd))
    y = gemm_epilogue(channels_last_rows(x), w.reshape(out_c, c), bias, res, trans_b=1, activation=activation,
                      alpha=alpha, beta=beta, residual_first=residual_first, cfg=cfg)
    return y.view(n, h, wd, out_c).permute(0, 3, 1, 2)


class _TritonConv1x1:
    @staticmethod
    def supports(layer, device):
        why = pointwise_reason(layer)
        return why or _CudnnTritonEpilogue.supports(layer, device)

    @staticmethod
    def fits(layer, cfg, inputs):
        x, w = inputs[0], inputs[1]
        if not isinstance(x, torch.Tensor) or not isinstance(w, torch.Tensor):
            return None
        if x.dim() != 4 or w.dim() != 4:
            return f"a {x.dim() - 2}-D convolution (this tactic is 2-D)"
        why = pointwise_reason(layer, tuple(w.shape))
        if why:
            return why
        rows = torch.empty((x.shape[0] * x.shape[2] * x.shape[3], x.shape[1]), dtype=x.dtype, device=x.device)
        gemm = Layer(layer.name, "MatMulEpilogue", ["a", "b"], ["y"], {"trans_b": 1})
        return TritonGemmEpilogue.fits(gemm, cfg, [rows, w.reshape(w.shape[0], -1)])

    @staticmethod
    def build(layer, cfg, device):
        act, alpha, beta, res_first = epilogue_attrs(layer.attrs)

        def run(inputs):
            x, w, bias, residual = epilogue_operands(inputs)
            return [conv1x1_gemm(x, w, bias, residual, act, alpha, beta, res_first, cfg)]
        return run


@tactic("FusedConv", name="triton_conv1x1", configs=CONFIGS, priority=-145)
class FusedConv1x1(_TritonConv1x1):
    """FusedConv(x, w[, bias[, residual]]), 1×1: below the library tactics, so untimed builds keep theirs; timed
    builds compare it with cuDNN (+ epilogue) by measured time."""


@tactic("Conv", name="triton_conv1x1", configs=CONFIGS, priority=-145)
class Conv1x1(_TritonConv1x1):
    """Conv(x, w[, b]), 1×1 (a projection with a bias and nothing after it)."""
