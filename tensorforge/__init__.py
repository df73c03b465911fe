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
