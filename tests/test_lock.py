"""requirements-ci.lock is the resolution of requirements-ci.in (scripts/lock.sh): every top-level pin is in
the lock at its version, every lock line is one exact `name==version`, and setup.sh installs the lock in one
pip run. (.ci/run checks the installed environment against the lock, package by package.)"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;#]+)$")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(path: Path) -> dict[str, str]:
    out = {}
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = PIN.match(line)
        assert m, f"{path.name}:{lineno}: {raw!r} is not an exact `name==version` pin"
        out[_norm(m.group(1))] = m.group(3)
    return out


def test_every_top_level_pin_is_locked_at_its_version():
    top, lock = _pins(ROOT / "requirements-ci.in"), _pins(ROOT / "requirements-ci.lock")
    for name, version in top.items():
        assert name in lock, f"{name} is in requirements-ci.in but not in the lock: run scripts/lock.sh"
        assert lock[name].split("+")[0] == version, \
            f"{name}: .in pins {version}, the lock has {lock[name]}: run scripts/lock.sh"
    assert lock["torch"] == "2.13.0+cpu"                     # the CPU build on disk, never a CUDA download
    assert {"pip", "setuptools", "protobuf", "ml-dtypes"} <= set(lock)   # installers and transitive numerics too


def test_setup_installs_the_lock_in_one_pip_run():
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert len(re.findall(r"pip install -q -r requirements-ci\.lock", setup)) == 1
    assert "--no-deps" in setup and "requirements-ci.in" not in setup.split("set -euo")[1]
    assert not (ROOT / "requirements-ci.txt").exists()
