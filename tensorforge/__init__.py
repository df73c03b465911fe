"""tensorforge — build fast inference engines from ONNX or PyTorch, the TensorRT way, in Python.

    import tensorforge as tfg
    engine = tfg.build("model.onnx", fp16=True)
    engine.save("model.engine"); engine = tfg.load("model.engine")
    y = engine(x)

Names are resolved on first use (PEP 562), so `import tensorforge` loads neither torch, onnx, Triton nor the
builder: `tfg.load` brings in only the runtime, `tfg.build` the parser and builder, and TensorRT's Python names
(Builder, OnnxParser, Runtime, DataType …: `import tensorforge as trt` ports a script) come from `api.trt`.
"""

import importlib
import importlib.util

from .version import __version__

# name → module that defines it; every other public name is one of TensorRT's, looked up in api.trt
_LAZY = {"Engine": "tensorforge.api", "build": "tensorforge.api", "load": "tensorforge.api",
         "TensorforgeError": "tensorforge.util.errors", "Logger": "tensorforge.util.log"}
_OWN = ["Engine", "Logger", "TensorforgeError", "__version__", "build", "load"]


def _trt():
    return importlib.import_module("tensorforge.api.trt")


def __getattr__(name: str):
    if name == "__all__":
        return _OWN + [n for n in _trt().__all__ if n not in _OWN]
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name.startswith("__"):
        raise AttributeError(name)
    elif importlib.util.find_spec(f"tensorforge.{name}") is not None:     # a room: tfg.plugin, tfg.api …
        value = importlib.import_module(f"tensorforge.{name}")
    else:
        trt = _trt()
        if name not in trt.__all__:
            raise AttributeError(f"module 'tensorforge' has no attribute {name!r}")
        value = getattr(trt, name)
    globals()[name] = value          # resolved once; later lookups are plain attribute reads
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_trt().__all__))
