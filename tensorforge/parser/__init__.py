"""parser — ONNX ModelProto → Network.

Entry points: `parse_model(path_or_bytes_or_proto)` and `parse_torch(module, example_inputs)`.
One small importer per op, keyed by (domain, op_type, since_version) in `registry.py`; importers live
one family per module in `importers/`. Unknown op types are looked up in the plugin registry.
May import ir, plugin, util; this room and compare/ and backend.py are the only users of `onnx`.
"""

from .onnx_model import parse_model
from .registry import importer, supported_versions

__all__ = ["importer", "parse_model", "supported_versions"]
