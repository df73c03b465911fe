"""kernels — implementations ("tactics") of IR ops.

Entry points: `registry.tactic` (decorator), `registry.candidates(layer)`, `registry.instantiate(tactic_id, layer)`.
A Kernel is a callable `kernel(inputs: list[Tensor | None]) -> list[Tensor]`, built once per layer and device.
Every op with an OpSpec has the generic `torch_ref` tactic (its reference run eagerly on the layer's device);
faster tactics (cuBLAS/cuDNN through torch, Triton) register beside it in one module each.
Imports ir, plugin, util.
"""

from . import reference  # noqa: F401  (registers the generic tactic)
from .registry import Kernel, Tactic, candidates, instantiate, tactic

__all__ = ["Kernel", "Tactic", "candidates", "instantiate", "tactic"]
