"""Runtime: engine bytes or file → Engine, with clear errors for bad files.

Loading checks the file (engine/serialize.py), that its plugins are registered, and regenerates the source of its
generated kernels from the layers' data (kernel_regen.py): a malformed program fails here, not at the first run.
"""

from ..engine import Engine, from_bytes
from ..util.device import resolve_device
from ..util.fileio import read_bytes
from .kernel_regen import regenerate_kernels
from .plugins_check import check_plugins


def _checked(engine: Engine, what: str) -> Engine:
    check_plugins(engine)
    regenerate_kernels(engine, what)
    return engine


class Runtime:
    def __init__(self, device=None):
        self.device = resolve_device(device)

    def deserialize(self, data: bytes, what: str = "engine") -> Engine:
        return _checked(from_bytes(bytes(data), what), what)


def load_engine_file(path) -> Engine:
    what = f"engine file {path}"
    return _checked(from_bytes(read_bytes(path, "engine file"), what), what)
