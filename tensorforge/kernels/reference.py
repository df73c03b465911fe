"""The generic tactic: run the op's torch reference eagerly on the layer's device.

Applies to every op with an OpSpec. On CUDA the reference's torch calls dispatch to cuBLAS/cuDNN/ATen
kernels, so this is a real (if unfused) implementation, and the baseline every faster tactic is timed against.
"""

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

        def run(inputs):
            return as_outputs(fn(*inputs, **attrs), n)
        return run
