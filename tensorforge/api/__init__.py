"""api — the public faces: `build`, `load`, and the runnable `Engine` (run / __call__ / save).

The TensorRT-style classes (Builder, OnnxParser, Runtime, ...) are thin wrappers that live beside these.
May import every room but compare and cli.
"""

from ..util.errors import InputError, UsageError      # what backend.py (which may import only api) raises
from ..util.values import OptionalValue, TensorSequence  # and the run-time values it wraps
from .high_level import Engine, build, load

__all__ = ["Engine", "build", "load"]
