"""Tactic: 2-D MaxPool on int8/uint8 codes (passes/rules/qdq_pool.py moves the pools of quantized networks
there) through the Triton max-pool kernel of triton_maxpool.py, channels-last out.

    y[n, c, p] = max_q x[n, c, p·s + q·d − pad_begin],   taps outside x read as the type's minimum
                 (−128 or 0: the code of −∞, so the result equals the float pool of the dequantized values)
The kernel keeps the running max in the codes' own type (exact). Traffic: x read once per overlapping window
(from L2 after the first), y written once, 1 byte each — a quarter of the fp16 pool plus the standalone Q it
replaces. Output: (N, C, OH, OW) as a view of NHWC memory.
Entry points: tactic `maxpool.triton_int8`, launcher `max_pool_int8` (tests run it under TRITON_INTERPRET=1).
"""

import torch

from .registry import tactic, triton_device_reason
from .triton_maxpool import max_pool_2d, pool_reason

CONFIGS = [{"BLOCK_P": 32, "BLOCK_C": 64, "warps": 4}, {"BLOCK_P": 64, "BLOCK_C": 32, "warps": 4},
           {"BLOCK_P": 16, "BLOCK_C": 128, "warps": 4}]
_CODES = (torch.int8, torch.uint8)


def max_pool_int8(x: torch.Tensor, attrs: dict, cfg: dict | None = None) -> torch.Tensor:
    """MaxPool (ONNX attributes, 2-D) of int8/uint8 x (N, C, H, W), any strides; returns an NHWC-memory view."""
    if x.dtype not in _CODES or x.dim() != 4:
        raise ValueError(f"max_pool_int8 takes a 4-D int8/uint8 tensor, got {x.dim()}-D {x.dtype}")
    return max_pool_2d(x, attrs, {**CONFIGS[0], **(cfg or {})})


def _fits(layer, cfg, inputs):
    x = inputs[0]
    return None if x.dtype in _CODES and x.dim() == 4 else f"{x.dtype} {x.dim()}-D input: the kernel pools int8 codes"


@tactic("MaxPool", name="triton_int8", configs=CONFIGS, priority=-120)
class TritonMaxPoolInt8:
    """Below the reference: runs where tactics are timed (CUDA), after fits() has seen an int8/uint8 input."""
    supports = staticmethod(lambda layer, device: triton_device_reason(device) or pool_reason(layer))
    fits = staticmethod(_fits)

    @staticmethod
    def build(layer, cfg, device):
        def run(inputs):
            return [max_pool_int8(inputs[0], layer.attrs, cfg)]
        return run
