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
import sys

from .version import __version__

# name → module that defines it; every other public name is one of TensorRT's, looked up in api.trt
_LAZY = {"Engine": "tensorforge.api", "build": "tensorforge.api", "load": "tensorforge.api",
         "TensorforgeError": "tensorforge.util.errors", "Logger": "tensorforge.util.log",
         "compile": "tensorforge.frontend_torch", "save": "tensorforge.frontend_torch",
         "load_module": "tensorforge.frontend_torch"}
_OWN = ["Engine", "Logger", "TensorforgeError", "__version__", "build", "compile", "load", "load_module", "save"]


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


def _dynamo_backend(gm, example_inputs, **kwargs):
    """torch.compile(backend="tensorforge"): the real backend is imported on the first compiled graph."""
    return __getattr__("frontend_torch").tensorforge_backend(gm, example_inputs, **kwargs)


def _register_dynamo_backend() -> None:
    from torch._dynamo.backends.registry import _BACKENDS, register_backend
    if "tensorforge" not in _BACKENDS:
        register_backend(_dynamo_backend, name="tensorforge")


class _WhenDynamoLoads:
    """A sys.meta_path finder that names the backend right after dynamo's registry module is executed, so that
    `import tensorforge` costs nothing here and `torch.compile(backend="tensorforge")` still finds it."""

    _NAME = "torch._dynamo.backends.registry"

    def find_spec(self, name, path, target=None):
        if name != self._NAME:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                _register_dynamo_backend()
            spec.loader.exec_module = exec_module
        return spec


if "torch._dynamo.backends.registry" in sys.modules:
    _register_dynamo_backend()
elif not any(isinstance(f, _WhenDynamoLoads) for f in sys.meta_path):
    sys.meta_path.insert(0, _WhenDynamoLoads())
