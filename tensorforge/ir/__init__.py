"""ir — THE network IR: dtypes, TensorInfo, Layer, Network, the OpSpec registry, printer, verifier.

Entry points: `Network`, `Layer`, `TensorInfo`, `opspec.get_spec`, `interpret.propagate`, `printer.format_network`.
Ops live one family per file in `ir/ops/`; each has ONE torch reference implementation, which is the oracle
for tactics and constant folding and, run on meta tensors, the default shape/dtype inference.
Imports only `util`.
"""

from .dtypes import dtype_from_name, dtype_name, is_float
from .layer import Layer
from .network import Network
from .opspec import OpSpec, get_spec, has_spec, op, registered_ops
from .tensor import TensorInfo
from . import ops  # noqa: F401  (registers the built-in OpSpecs)

__all__ = ["Layer", "Network", "OpSpec", "TensorInfo", "dtype_from_name", "dtype_name", "get_spec",
           "has_spec", "is_float", "op", "registered_ops"]
