"""torchvision's model code on a machine whose torchvision wheel does not match torch (its C++ extension fails to
load, e.g. the CPU box: torch 2.13.0 CPU). Import this module first: it registers a `torchvision` package whose
__init__ (which loads the extension) never runs, so `torchvision.models` imports from the wheel's files. Models
build and export to ONNX; detection ops (nms, roi_align) do not exist.

    pip download torchvision==0.28.0 --no-deps -d /tmp/tvw
    pip install --no-deps --target /tmp/tvlib /tmp/tvw/torchvision-*.whl
    TORCHVISION_DIR=/tmp/tvlib PYTHONPATH=.:bench python3 -c "import torchvision_shim, runpy, sys; \
        sys.argv = ['bench/cpu_int8_accuracy.py', 'efficientnet_b0']; runpy.run_path(sys.argv[0], run_name='__main__')"
"""

import os
import sys
import types

_DIR = os.path.join(os.environ.get("TORCHVISION_DIR", "/tmp/tvlib"), "torchvision")
if not os.path.isdir(_DIR):
    raise ImportError(f"no torchvision package at {_DIR}: set TORCHVISION_DIR to the folder holding it")
_pkg = types.ModuleType("torchvision")
_pkg.__path__ = [_DIR]
with open(os.path.join(_DIR, "version.py")) as _f:      # `__version__ = '0.28.0+cpu'` and friends
    _v = next((ln.split("=", 1)[1].strip().strip("'\"") for ln in _f if ln.startswith("__version__")), "?")
_pkg.__version__ = f"{_v}, model code only"
sys.modules["torchvision"] = _pkg
sys.modules["torchvision._meta_registrations"] = types.ModuleType("torchvision._meta_registrations")
import torchvision.models as _models  # noqa: E402

_pkg.models = _models
