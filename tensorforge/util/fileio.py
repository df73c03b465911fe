"""File helpers: atomic writes (never a half-written file in place of a good one) and readable reads.

`atomic_write(path, data)` writes `.NAME.tfg-<pid>-<random>.tmp` beside the target, fsyncs, renames it over the
target and fsyncs the folder. A process killed mid-write leaves its temporary behind; the next successful write
into that folder removes every temporary of ours whose process is gone. New files get the umask's mode
(0666 & ~umask), an existing file keeps its mode, and a symlink is written through to its target.
Every OS failure (no space, permission, read-only folder) is one FileNotFound line.
"""

import errno
import os
import re
import secrets
from pathlib import Path

from .errors import FileNotFound

_TMP = re.compile(r"^\..+\.tfg-(\d+)-[0-9a-f]{8}\.tmp$")


def _umask() -> int:
    """The process umask without changing it (Linux: /proc; elsewhere the set-and-restore dance)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True            # someone else's live process
    return True


def remove_stale_temporaries(folder) -> list[str]:
    """Delete `.*.tfg-<pid>-<hex>.tmp` files in `folder` whose writing process no longer exists."""
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        m = _TMP.match(name)
        if m and not _pid_alive(int(m.group(1))):
            try:
                os.unlink(os.path.join(folder, name))
                removed.append(name)
            except OSError:
                pass
    return removed


def _fail(path, e: OSError) -> FileNotFound:
    hint = {errno.ENOSPC: "free some space on that disk or write elsewhere",
            errno.EDQUOT: "free some space (disk quota exceeded) or write elsewhere",
            errno.EROFS: "the file system is read-only: write elsewhere",
            errno.EACCES: "choose a writable path or fix its permissions",
            errno.EPERM: "choose a writable path or fix its permissions"}.get(e.errno, "choose a writable path")
    return FileNotFound(f"cannot write {path}: {e.strerror or e}", hint)


def atomic_write(path, data: bytes | str) -> None:
    """Write `data` to `path` atomically: the old file (if any) stays whole until the new one is complete."""
    shown = path
    path = Path(path)
    if isinstance(data, str):
        data = data.encode()
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise FileNotFound(f"cannot write {shown}: folder {folder} does not exist", "create it first")
    if target.is_dir():
        raise FileNotFound(f"cannot write {shown}: it is a folder", "name a file")
    try:
        mode = os.stat(target).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    except OSError as e:
        raise _fail(shown, e) from None
    tmp = folder / f".{target.name}.tfg-{os.getpid()}-{secrets.token_hex(4)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise _fail(shown, e) from None
        raise
    try:
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass                   # some file systems refuse fsync on a folder; the rename itself is done
    remove_stale_temporaries(folder)


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
