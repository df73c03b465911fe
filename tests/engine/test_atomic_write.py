"""Nothing lost, nothing left behind (issue 13.5): atomic writes under SIGKILL, modes, symlinks, full disks.

The SIGKILL tests fork a child that saves again and again — the `--saveEngine` path (`cli.io_files.write_bytes`)
and `TimingCache.save` — and kill it at a random moment, 20 times each. The oracle is the previous content: after
every kill the file is byte-for-byte one of the two complete versions, and after the next successful save into
the folder no temporary file of ours is left.
"""

import errno
import os
import random
import signal
import time

import pytest

from tensorforge.builder.timing_cache import TimingCache
from tensorforge.cli import io_files
from tensorforge.util import fileio
from tensorforge.util.errors import FileNotFound

KILLS = 20


def _temps(folder) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.endswith(".tmp"))


def _kill_during(write, seed: int, folder) -> None:
    """Fork a child that calls `write()` in a loop; SIGKILL it at a random moment; reap it.

    Even seeds: after a random delay. Odd seeds: a random few milliseconds after the child's temporary file
    appears, so that half of the kills land inside the write window whatever the machine's speed."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                     # child: no pytest, no cleanup, just writes
        try:
            os.close(r)
            os.write(w, b"1")
            while True:
                write()
        finally:
            os._exit(0)
    os.close(w)
    os.read(r, 1)
    os.close(r)
    rng = random.Random(seed)
    if seed % 2:
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and not any(f".tfg-{pid}-" in n for n in os.listdir(folder)):
            time.sleep(0.0005)
        time.sleep(rng.uniform(0.0, 0.003))
    else:
        time.sleep(rng.uniform(0.0, 0.08))
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def test_sigkill_during_save_engine_keeps_a_whole_file_and_the_next_save_sweeps(tmp_path):
    target = tmp_path / "model.engine"
    old, new = os.urandom(1 << 20) * 16, os.urandom(1 << 20) * 16      # 16 MiB each: a write takes a while
    io_files.write_bytes(str(target), old, "engine file")
    left = 0
    for i in range(KILLS):
        _kill_during(lambda: io_files.write_bytes(str(target), new, "engine file"), i, tmp_path)
        assert target.read_bytes() in (old, new), f"kill {i}: the engine file is not a whole version"
        left += bool(_temps(tmp_path))
    io_files.write_bytes(str(target), old, "engine file")       # the next successful save into the folder
    assert target.read_bytes() == old
    assert _temps(tmp_path) == []
    assert left > 0, "no kill landed during a write: the test did not exercise the interrupted path"


def test_sigkill_during_timing_cache_save(tmp_path):
    path = tmp_path / "tc.json"
    first = TimingCache()
    first.record("dev0", "k0", {"best": "any.torch_ref", "ms": 1.0})
    first.save(path)
    big = TimingCache()
    for k in range(20000):
        big.record("dev0", f"key{k:06d}", {"best": "any.torch_ref", "ms": float(k)})
    left = 0
    for i in range(KILLS):
        _kill_during(lambda: big.save(path), 100 + i, tmp_path)
        loaded = TimingCache.load(path)                         # whole: it parses, and holds k0
        assert loaded.devices["dev0"]["k0"]["best"] == "any.torch_ref"
        assert len(loaded) in (1, 20001)
        left += bool(_temps(tmp_path))
    first.save(path)
    assert _temps(tmp_path) == []
    assert left > 0


def test_temporaries_of_live_processes_are_kept(tmp_path):
    mine = tmp_path / f".x.tfg-{os.getpid()}-0123abcd.tmp"
    mine.write_bytes(b"in flight")
    dead = tmp_path / ".x.tfg-999999999-0123abcd.tmp"          # no such pid
    dead.write_bytes(b"stale")
    foreign = tmp_path / ".x.something.tmp"                     # not ours
    foreign.write_bytes(b"keep")
    fileio.atomic_write(tmp_path / "x", b"data")
    assert mine.exists() and foreign.exists() and not dead.exists()


def test_new_file_gets_the_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        fileio.atomic_write(tmp_path / "a.engine", b"x")
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "a.engine").st_mode & 0o777 == 0o640
    old = os.umask(0o022)
    try:
        fileio.atomic_write(tmp_path / "b.engine", b"x")
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "b.engine").st_mode & 0o777 == 0o644


def test_existing_file_keeps_its_mode(tmp_path):
    p = tmp_path / "a.engine"
    p.write_bytes(b"old")
    os.chmod(p, 0o644)
    fileio.atomic_write(p, b"new")
    assert os.stat(p).st_mode & 0o777 == 0o644 and p.read_bytes() == b"new"
    os.chmod(p, 0o600)
    fileio.atomic_write(p, b"newer")
    assert os.stat(p).st_mode & 0o777 == 0o600


def test_symlink_is_written_through(tmp_path):
    real = tmp_path / "store" / "model.engine"
    real.parent.mkdir()
    real.write_bytes(b"old")
    link = tmp_path / "current.engine"
    link.symlink_to(real)
    fileio.atomic_write(link, b"new")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_bytes() == b"new"
    assert _temps(tmp_path) == [] and _temps(real.parent) == []


def test_full_disk_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    p = tmp_path / "a.engine"
    p.write_bytes(b"previous")

    def no_space(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(fileio.os, "write", no_space)
    with pytest.raises(FileNotFound) as e:
        fileio.atomic_write(p, b"x" * 100)
    assert "No space left" in str(e.value) and "\n" not in str(e.value)
    monkeypatch.undo()
    assert p.read_bytes() == b"previous" and _temps(tmp_path) == []


def test_engine_and_timing_cache_save_on_full_disk_raise_project_errors(tmp_path, monkeypatch):
    from engine_craft import small_cnn_engine
    from tensorforge.engine import from_bytes
    from tensorforge.api.high_level import Engine
    eng = Engine(from_bytes(small_cnn_engine()), "cpu")
    monkeypatch.setattr(fileio.os, "write", lambda fd, data: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left on device")))
    with pytest.raises(FileNotFound, match="No space left"):
        eng.save(tmp_path / "m.engine")
    with pytest.raises(FileNotFound):
        TimingCache().save(tmp_path / "tc.json")
