"""The generic tactic: run the op's torch reference eagerly on the layer's device.

Applies to every op with an OpSpec. On CUDA the reference's torch calls dispatch to cuBLAS/cuDNN/ATen
kernels, so this is a real (if unfused) implementation, and the baseline every faster tactic is timed against.
A reference whose only inputs are host values (ConstantOfShape, Range, EyeLike …) creates its output on the
host; on a CUDA layer that output is moved to the device once per run (the check is a device comparison).
"""

import torch

from ..ir import get_spec
from ..ir.interpret import as_outputs
from .registry import tactic


@tactic("*", name="torch_ref", priority=-100)
class TorchReference:
    @staticmethod
    def supports(layer, device):
        return None

    @staticmethod
    def build(layer, cfg, device):
        fn, attrs, n = get_spec(layer.op).reference, layer.attrs, len(layer.outputs)

        if device.type == "cpu":
            def run(inputs):
                return as_outputs(fn(*inputs, **attrs), n)
            return run

        def run_on_device(inputs):
            outs = as_outputs(fn(*inputs, **attrs), n)
            return [o.to(device) if isinstance(o, torch.Tensor) and o.device != device else o for o in outs]
        return run_on_device
