"""Tactics: GatedConv as the gate Mul followed by any FusedConv tactic — `gatedconv.mul_<name>`.

    GatedConv(x, gate, w, bias, residual) = FusedConv(x ⊙ gate, w, bias, residual)

For every FusedConv tactic (cuDNN, oneDNN, torch …; not the Triton 1×1 GEMM: DOMINATED) one GatedConv tactic with
the same configs and priority runs torch's x·gate (one elementwise pass: read x, write x ⊙ g, 2·|x| of traffic) and then
that tactic on the product. These are the kernels the unfused graph ran (the Mul, then the convolution's tactic),
so a timed build that prefers them over the fused gate (kernels/triton_gated_conv1x1.py) loses nothing to the
fusion rule, and on the CPU the convolution keeps its oneDNN primitive.
Entry point: `derive_mul_first()` registers a wrapper for each FusedConv tactic not wrapped yet; kernels/__init__
calls it after the eager tactic modules and again after the Triton ones load.
"""

import torch

from ..ir import Layer
from .registry import Tactic, derive

PREFIX = "mul_"
# FusedConv tactics not wrapped: the Triton 1×1 GEMM after a separate Mul is the gated GEMM's own work plus a pass
# over x (kernels/triton_gated_conv1x1.py scales A in the same loop), so it is never the faster of the two; left
# out, a cold build compiles and times four candidates fewer per squeeze-excite projection
DOMINATED = frozenset({"triton_conv1x1"})


def as_fused_conv(layer: Layer) -> Layer:
    """The FusedConv layer the convolution part of GatedConv `layer` is: inputs (x⊙gate, w, bias, residual)."""
    return Layer(layer.name, "FusedConv", [layer.inputs[0]] + list(layer.inputs[2:]), list(layer.outputs),
                 dict(layer.attrs), list(layer.origin), layer.tactic, layer.placement, layer.precision)


def _fused_inputs(inputs: list) -> list:
    return [inputs[0]] + list(inputs[2:])


def _wrap(inner: Tactic) -> Tactic:
    def supports(layer, device):
        return inner.supports(as_fused_conv(layer), device)

    def fits(layer, cfg, inputs):
        return inner.fits(as_fused_conv(layer), cfg, _fused_inputs(inputs)) if inner.fits else None

    def build(layer, cfg, device):
        conv = inner.build(as_fused_conv(layer), cfg, device)

        def run(inputs):
            return conv([torch.mul(inputs[0], inputs[1])] + list(inputs[2:]))
        return run

    return Tactic("GatedConv", PREFIX + inner.name, supports, build, list(inner.configs), inner.priority,
                  fits if inner.fits else None)


def derive_mul_first() -> int:
    """Register `gatedconv.mul_<name>` for every FusedConv tactic that has none yet; returns how many were added."""
    return derive("GatedConv", "FusedConv", PREFIX, _wrap, DOMINATED)
