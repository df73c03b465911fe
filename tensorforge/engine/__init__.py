"""engine — the built artifact as data: Engine, serialize/deserialize, describe.

Entry points: `Engine`, `serialize.to_bytes(engine)`, `serialize.from_bytes(data)`.
An engine file holds no pickle and no code to execute: a binary header, a JSON manifest and safetensors weights.
Generated kernels are stored as their layers' programs; the runtime regenerates their source. Imports ir, util.
"""

from .engine import Engine
from .serialize import from_bytes, to_bytes

__all__ = ["Engine", "from_bytes", "to_bytes"]
