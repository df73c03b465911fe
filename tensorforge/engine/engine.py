"""Engine: everything needed to run a built network, and nothing that needs the builder.

- `inputs`/`outputs`: TensorInfo with -1 for dimensions that vary across profiles;
- `profiles`: per profile, input name → (min, opt, max);
- `layers`: IR layers in execution order, each with its tactic id, placement and precision;
- `tensors`: dtype/shape of every tensor (shape dims -1 where dynamic);
- `constants`: weights (torch tensors, CPU);
- no kernel source: a PointwiseChain layer holds its program and the hash of its generated source, which the
  runtime regenerates from that program at load (runtime/kernel_regen.py) — an engine is data, never code;
- `plugins`: (namespace::name, version) of every plugin the engine calls;
- `build_info`: device fingerprint, flags, versions, build time.
"""

from dataclasses import dataclass, field
from typing import Any

import torch

from ..ir import Layer, TensorInfo

Profile = dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]


@dataclass
class Engine:
    name: str
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    profiles: list[Profile]
    layers: list[Layer]
    tensors: dict[str, TensorInfo]
    constants: dict[str, torch.Tensor]
    plugins: list[dict[str, Any]] = field(default_factory=list)
    build_info: dict[str, Any] = field(default_factory=dict)

    @property
    def input_names(self) -> list[str]:
        return [t.name for t in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [t.name for t in self.outputs]

    def weight_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.constants.values())
