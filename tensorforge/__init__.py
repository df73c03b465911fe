"""tensorforge — build fast inference engines from ONNX or PyTorch, the TensorRT way, in Python.

    import tensorforge as tfg
    engine = tfg.build("model.onnx", fp16=True)
    engine.save("model.engine"); engine = tfg.load("model.engine")
    y = engine(x)
"""

from .api import Engine, build, load
from .util.errors import TensorforgeError
from .util.log import Logger
from .version import __version__

__all__ = ["Engine", "Logger", "TensorforgeError", "__version__", "build", "load"]

# TensorRT's Python names (Builder, OnnxParser, Runtime, DataType, ...): `import tensorforge as trt` ports a script
from .api import trt as _trt  # noqa: E402
from .api.trt import *  # noqa: E402,F401,F403

__all__ += [n for n in _trt.__all__ if n not in __all__]
