"""Tactics: TwoLayerMLP as two launches of one MatMulEpilogue tactic — `twolayermlp.pair_<name>`.

    TwoLayerMLP(a, w1, b1, w2, b2) = MatMulEpilogue(MatMulEpilogue(a, w1, b1; ·1), w2, b2; ·2)

For every MatMulEpilogue tactic (cuBLAS/cuBLASLt through torch, the Triton GEMM, oneDNN/MKL on the CPU) one
TwoLayerMLP tactic with the same configs and priority runs that tactic on each half, h written between them:
the kernels the unfused graph ran, so a timed build that prefers them over the one-launch kernel
(kernels/triton_mlp2.py) keeps what it had (where the two halves had picked the same tactic and config; a pair
may not mix them). A config is taken when it fits both halves.
Entry point: `derive_pairs()` (kernels/__init__, after the eager tactics and again after the Triton ones).
"""

import torch

from ..ir import Layer
from ..ir.ops.fused import mlp_layer_attrs
from .registry import Tactic, derive

PREFIX = "pair_"


def halves(layer: Layer) -> tuple[Layer, Layer]:
    """The two MatMulEpilogue layers of TwoLayerMLP `layer`: (a, w1, b1) → h and (h, w2, b2) → y."""
    ins = list(layer.inputs) + [""] * (5 - len(layer.inputs))
    h = f"{layer.name}/h"

    def attrs(k):
        return {**mlp_layer_attrs(layer.attrs, k), "residual_first": 0}
    first = Layer(f"{layer.name}/1", "MatMulEpilogue", [ins[0], ins[1], ins[2]], [h], attrs(1), list(layer.origin),
                  placement=layer.placement, precision=layer.precision)
    second = Layer(f"{layer.name}/2", "MatMulEpilogue", [h, ins[3], ins[4]], list(layer.outputs), attrs(2),
                   list(layer.origin), placement=layer.placement, precision=layer.precision)
    return first, second


def hidden_width(w1: torch.Tensor, trans_b1: int) -> int:
    """H: the first layer's output width (w1 is (H, C) when trans_b1, else (C, H))."""
    return int(w1.shape[0] if trans_b1 else w1.shape[-1])


def mlp_operands(inputs: list) -> list:
    """(a, w1, b1, w2, b2) of a TwoLayerMLP's inputs, absent ones None."""
    return list(inputs) + [None] * (5 - len(inputs))


def _wrap(inner: Tactic) -> Tactic:
    def supports(layer, device):
        first, second = halves(layer)
        return inner.supports(first, device) or inner.supports(second, device)

    def fits(layer, cfg, inputs):
        a, w1, b1, w2, b2 = mlp_operands(inputs)
        if not all(isinstance(t, torch.Tensor) for t in (a, w1)):
            return None
        first, second = halves(layer)
        h = torch.empty((*a.shape[:-1], hidden_width(w1, layer.attrs.get("trans_b1", 0))), dtype=a.dtype,
                        device=a.device)
        return inner.fits(first, cfg, [a, w1, b1]) or inner.fits(second, cfg, [h, w2, b2])

    def build(layer, cfg, device):
        first, second = halves(layer)
        k1, k2 = inner.build(first, cfg, device), inner.build(second, cfg, device)

        def run(inputs):
            a, w1, b1, w2, b2 = mlp_operands(inputs)
            return k2([k1([a, w1, b1])[0], w2, b2])
        return run

    return Tactic("TwoLayerMLP", PREFIX + inner.name, supports, build, list(inner.configs), inner.priority,
                  fits if inner.fits else None)


def derive_pairs() -> int:
    """Register `twolayermlp.pair_<name>` for every MatMulEpilogue tactic that has none yet."""
    return derive("TwoLayerMLP", "MatMulEpilogue", PREFIX, _wrap)
