"""Runtime: engine bytes or file → Engine, with clear errors for bad files."""

from ..engine import Engine, from_bytes
from ..util.device import resolve_device
from ..util.fileio import read_bytes
from .plugins_check import check_plugins


class Runtime:
    def __init__(self, device=None):
        self.device = resolve_device(device)

    def deserialize(self, data: bytes, what: str = "engine") -> Engine:
        return check_plugins(from_bytes(bytes(data), what))


def load_engine_file(path) -> Engine:
    return check_plugins(from_bytes(read_bytes(path, "engine file"), f"engine file {path}"))
