"""The seed models of examples/gelu/model.py (nn.GELU twice; the MyGelu autograd Function), shared by the tests
so that the tests exercise exactly what the example ships."""

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[1] / "examples" / "gelu" / "model.py"
_spec = importlib.util.spec_from_file_location("tensorforge_example_gelu_model", _PATH)
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)

MyNet, MyGelu, MyNetPlugin = _module.MyNet, _module.MyGelu, _module.MyNetPlugin
