"""File helpers: atomic writes (never a half-written file in place of a good one) and readable reads."""

import os
import tempfile
from pathlib import Path

from .errors import FileNotFound


def atomic_write(path, data: bytes | str) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over `path`.

    If anything fails before the rename, the old file (if any) is untouched and the temporary is removed.
    """
    path = Path(path)
    if isinstance(data, str):
        data = data.encode()
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise FileNotFound(f"cannot write {path}: folder {folder} does not exist", "create it first")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_bytes(path, what: str = "file") -> bytes:
    """Read a user-named file, turning OS errors into a one-line FileNotFound."""
    p = Path(path)
    if not p.exists():
        raise FileNotFound(f"{what} not found: {p}", "check the path")
    if p.is_dir():
        raise FileNotFound(f"{what} path is a folder, not a file: {p}", "name the file itself")
    try:
        return p.read_bytes()
    except OSError as e:
        raise FileNotFound(f"cannot read {what} {p}: {e.strerror}", "check its permissions") from e
