"""Layer: one operation of the network.

`inputs`/`outputs` are tensor names ('' marks an absent optional input); `attrs` follow the op's
OpSpec schema; `origin` lists the ONNX node names this layer came from (fusions merge origins);
`tactic` and `placement` are filled in by the builder.
"""

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Layer:
    name: str
    op: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    origin: list[str] = field(default_factory=list)
    tactic: str | None = None
    placement: str = "device"     # "device": runs where the engine runs; "host": small shape arithmetic on CPU
    precision: str | None = None
    # a dynamic profile's other points: "min"/"max" → the tactic timed fastest there, where it is not `tactic` (the
    # opt point's); the runtime runs it for input shapes nearest that point (builder/point_tactics.py)
    point_tactics: dict[str, str] | None = None

    def copy(self) -> "Layer":
        return Layer(self.name, self.op, list(self.inputs), list(self.outputs), dict(self.attrs),
                     list(self.origin), self.tactic, self.placement, self.precision,
                     dict(self.point_tactics) if self.point_tactics else None)
