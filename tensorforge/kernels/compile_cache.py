"""Persistent, checked cache of compiled Triton kernels for builds, and parallel ahead-of-time compilation.

Entry points: `for_build(device_fp)` (context manager: Triton's cache directory points at
~/.cache/tensorforge/triton/<device>/ for the build, every entry checked first, a `CompilePool` of worker
processes and a count of the kernels compiled in-process), `precompile(jobs, workers)` (compile callables in a
thread pool), `active_pool()`. The workers and their jobs: kernels/compile_pool.py; config pruning:
kernels/config_prune.py (both re-exported here).

Keys: Triton already names each cache entry by a hash of the kernel's source (and the source of every jitted
function it calls), its constexprs and specialisation (the config: BLOCK, tile sizes), num_warps/num_stages,
the target (sm_90) and Triton's version. The folder adds the device fingerprint (GPU name, compute capability:
util.device.fingerprint), so builds for different devices never share entries. Triton itself trusts whatever
bytes are on disk (a truncated cubin fails at load, mid-build); here an index (index.json: entry → sha256 of
each file) is written after every build, and before the next one every entry whose files are missing, changed
or not in the index (a crashed build) is deleted, so Triton compiles it again. Root: $TFG_CACHE_DIR, else
~/.cache/tensorforge. The cache holds compiler output only; engines never read it.
"""

import hashlib
import json
import os
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..util.errors import UsageError
from ..util.log import get_logger
from .compile_pool import CompilePool, compile_job, discover, job_key  # noqa: F401  (re-exported: one entry point)
from .config_prune import prune_block_configs, prune_tile_configs  # noqa: F401  (re-exported for the builder)

INDEX = "index.json"
_LOCK = threading.RLock()         # one build (thread) at a time points TRITON_CACHE_DIR somewhere
_ACTIVE: list = []                # the BuildCache of the build in progress (innermost last)


def cache_root() -> str:
    return os.environ.get("TFG_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "tensorforge")


def device_dir(device_fp: str, root: str | None = None) -> str:
    """The Triton cache folder for one device fingerprint (readable prefix + hash: fingerprints contain ':')."""
    safe = "".join(c if c.isalnum() else "_" for c in device_fp)[:40]
    digest = hashlib.sha256(device_fp.encode()).hexdigest()[:12]
    return os.path.join(root or cache_root(), "triton", f"{safe}-{digest}")


def _sha(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _entries(folder: str) -> dict[str, dict[str, str]]:
    """entry folder name → {file name → sha256} as found on disk."""
    out = {}
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        path = os.path.join(folder, name)
        if os.path.isdir(path):
            out[name] = {f: _sha(os.path.join(path, f)) for f in sorted(os.listdir(path))
                         if os.path.isfile(os.path.join(path, f))}
    return out


@dataclass
class CacheCheck:
    kept: int = 0
    removed: dict[str, str] = field(default_factory=dict)     # entry → why


def _read_index(folder: str) -> dict:
    """The folder's index (entry → its files' hashes); empty when missing or unreadable (it then trusts nothing)."""
    try:
        with open(os.path.join(folder, INDEX)) as f:
            index = json.load(f)
    except (ValueError, OSError):
        return {}
    return index if isinstance(index, dict) else {}


def check(folder: str, only_indexed: bool = False) -> CacheCheck:
    """Delete every entry of `folder` that does not match the index; returns what was kept and removed.
    `only_indexed`: another build is running (its new entries are not indexed yet): keep unindexed entries."""
    result = CacheCheck()
    index = _read_index(folder)
    for name, files in _entries(folder).items():
        want = index.get(name)
        why = ("not in the index (written by an interrupted build?)" if want is None else
               None if want == files else "files changed or missing since they were compiled")
        if why is None or (want is None and only_indexed):
            result.kept += why is None
            continue
        shutil.rmtree(os.path.join(folder, name), ignore_errors=True)
        result.removed[name] = why
    return result


def _complete(path: str, files: dict) -> bool:
    """Triton writes an entry's files, then its __grp__ file naming them: complete once every named file exists."""
    groups = [f for f in files if f.startswith("__grp__")]
    if not groups:
        return False
    try:
        for g in groups:
            with open(os.path.join(path, g)) as f:
                named = json.load(f).get("child_paths", {})       # {file name: path}, or a list of names
            if not all(os.path.basename(str(v)) in files for v in named):
                return False
    except (OSError, ValueError, AttributeError):
        return False
    return True


def write_index(folder: str) -> int:
    """Record every complete entry now in `folder` (atomic replace; an entry a concurrent build is still writing
    stays out, and a later exclusive check removes it if it never completes). Returns the number recorded."""
    entries = {name: files for name, files in _entries(folder).items()
               if _complete(os.path.join(folder, name), files)}
    tmp = os.path.join(folder, f".{INDEX}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        json.dump(entries, f, sort_keys=True)
    os.replace(tmp, os.path.join(folder, INDEX))
    return len(entries)


@dataclass
class BuildCache:
    folder: str
    checked: CacheCheck
    before: int = 0
    compiled: int = 0                 # entries this build added (kernels Triton compiled instead of loading)
    pool: "CompilePool | None" = None  # worker processes (TFG_COMPILE_WORKERS > 0), else None
    inline: int = 0                   # kernels this process compiled itself, at their first launch
    inline_s: float = 0.0             # … and the seconds those compiles took


def _listen(state: "BuildCache"):
    """Install a Triton compilation listener that counts this process's own compiles (cache misses) into
    `state`, chained to any listener already set; returns the previous one (None when Triton has no knob)."""
    try:
        from triton import knobs
        previous = knobs.compilation.listener
    except (ImportError, AttributeError):
        return _MISSING

    def listener(**kw):
        if not kw.get("cache_hit", True):
            t = kw.get("times")
            state.inline += 1
            state.inline_s += (getattr(t, "ir_initialization", 0) + getattr(t, "total_lowering", 0) +
                               getattr(t, "store_results", 0)) / 1e6
        if previous is not None:
            previous(**kw)
    knobs.compilation.listener = listener
    return previous


_MISSING = object()


def _set_triton_dir(path, previous=_MISSING):
    """Set Triton's cache-dir knob (Triton ≥ 3.4; older ones read the environment variable alone) and return
    the override it had; `path=None` restores `previous` (no override: the environment decides again)."""
    try:
        from triton import knobs
    except ImportError:
        return _MISSING
    had = knobs.cache.__dict__.get("dir", _MISSING)
    if path is not None:
        knobs.cache.dir = path
    elif previous is _MISSING:
        knobs.cache.__dict__.pop("dir", None)
    else:
        knobs.cache.dir = previous
    return had


def default_workers() -> int:
    """Half the CPU cores, 1 to 8: compiles are CPU-bound, and the building process keeps timing meanwhile."""
    return max(1, min(8, (os.cpu_count() or 2) // 2))


def workers_from_env() -> int:
    """TFG_COMPILE_WORKERS: worker processes for ahead-of-time Triton compiles (unset: `default_workers()`;
    0: none, every kernel compiles in the building process at its first launch)."""
    raw = os.environ.get("TFG_COMPILE_WORKERS", "").strip()
    if not raw:
        return default_workers()
    if not raw.isdigit():
        raise ValueError(f"TFG_COMPILE_WORKERS={raw!r} is not a number of worker processes; use 0 to turn them off")
    return int(raw)


def prestart_from_env() -> bool:
    """TFG_COMPILE_PRESTART: 1 (default) pre-starts a cold build's compile workers, 0 does not."""
    raw = os.environ.get("TFG_COMPILE_PRESTART", "1").strip()
    if raw not in ("0", "1"):
        raise UsageError(f"TFG_COMPILE_PRESTART={raw!r} is neither 0 nor 1",
                         "set TFG_COMPILE_PRESTART=0 to build without pre-started compile workers, or unset it")
    return raw == "1"


_PRESTARTED: dict[tuple[str, int], CompilePool] = {}      # (folder, workers) → a pool spawned ahead of its build
PRESTART_BELOW = 64     # pre-start only while the device's cache indexes fewer entries (a cold cache: first builds)


def prestart(device_fp: str, workers: int, root: str | None = None) -> tuple[str, int] | None:
    """Spawn the compile workers of a coming build now (CompilePool.prestart); the build's `for_build` with the
    same device, root and worker count takes them over. Only for a cold cache (< PRESTART_BELOW indexed entries):
    with a warm one most builds compile little or nothing, and pre-starting would spawn `workers` processes, each
    importing torch, for every build (a test session's hundreds of small builds) — the pool then starts with its
    first uncached job, as before. TFG_COMPILE_PRESTART=0 turns it off (to measure what it saves). Returns the key
    to `release` (None: nothing started)."""
    if workers <= 0 or not prestart_from_env():
        return None
    key = (device_dir(device_fp, root), workers)
    if len(_read_index(key[0])) >= PRESTART_BELOW:
        return None
    with _LOCK:
        if key in _PRESTARTED:
            return None
        pool = CompilePool(workers, key[0])
        try:
            pool.prestart()
        except Exception as e:  # noqa: BLE001 - e.g. no processes left to spawn: the build starts its pool later
            get_logger().verbose(f"compile workers not pre-started: {type(e).__name__}: {e}")
            pool.close()
            return None
        _PRESTARTED[key] = pool
    return key


def release(key: tuple[str, int] | None) -> None:
    """Close a pre-started pool that no build took over (the build failed before choosing tactics)."""
    with _LOCK:
        pool = _PRESTARTED.pop(key, None) if key is not None else None
    if pool is not None:
        pool.close()


@contextmanager
def for_build(device_fp: str, root: str | None = None, workers: int = 0):
    """Point Triton's cache at this device's checked folder for the duration of a build; yields a BuildCache
    whose `compiled` (set on exit) counts the kernels the build compiled — 0 for a warm rebuild — and whose
    `pool` compiles candidates in `workers` processes (none when 0). Yields None, with a warning, when the
    folder cannot be written (the build then uses Triton's own cache).

    Builds in other processes may share the folder: each holds a shared flock on <folder>/.lock for its whole
    build. The full check, which deletes unindexed entries, runs only under the exclusive lock (no other build
    running); otherwise only indexed entries whose files changed are removed (another build's new entries are
    not indexed yet)."""
    folder = device_dir(device_fp, root)
    with _LOCK:
        try:
            os.makedirs(folder, exist_ok=True)
            lock = open(os.path.join(folder, ".lock"), "a")
        except OSError as e:
            get_logger().warning(f"Triton kernel cache {folder} is not writable ({e.strerror}): this build compiles "
                                 "into Triton's own cache; set TFG_CACHE_DIR to a writable folder")
            yield None
            return
        with lock:
            exclusive = _lock(lock, exclusive=True, wait=False)
            state = BuildCache(folder, check(folder, only_indexed=not exclusive))
            _lock(lock, exclusive=False, wait=True)          # shared for the build (a downgrade if exclusive)
            for name, why in state.checked.removed.items():
                get_logger().verbose(f"kernel cache: removed {name[:16]}…: {why}")
            state.before = state.checked.kept
            old = os.environ.get("TRITON_CACHE_DIR")
            os.environ["TRITON_CACHE_DIR"] = folder
            had = _set_triton_dir(folder)
            state.pool = (_PRESTARTED.pop((folder, workers), None) or CompilePool(workers, folder)) if workers > 0 else None
            _ACTIVE.append(state)
            listening = _listen(state)
            try:
                yield state
            finally:
                if listening is not _MISSING:
                    from triton import knobs
                    knobs.compilation.listener = listening
                _ACTIVE.pop()
                if state.pool is not None:
                    state.pool.close()
                _set_triton_dir(None, had)
                if old is None:
                    os.environ.pop("TRITON_CACHE_DIR", None)
                else:
                    os.environ["TRITON_CACHE_DIR"] = old
                state.compiled = max(0, write_index(folder) - state.before)


def _lock(f, exclusive: bool, wait: bool) -> bool:
    """flock `f` shared or exclusive; False when `wait` is off and another process holds a conflicting lock."""
    try:
        import fcntl
    except ImportError:               # no flock on this platform: behave as the only build
        return True
    flags = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | (0 if wait else fcntl.LOCK_NB)
    try:
        fcntl.flock(f, flags)
        return True
    except BlockingIOError:
        return False


def active_pool() -> "CompilePool | None":
    """The worker pool of the build in progress (None outside a build, or with TFG_COMPILE_WORKERS=0)."""
    return _ACTIVE[-1].pool if _ACTIVE else None


def precompile(jobs, workers: int | None = None) -> list:
    """Run compile callables (e.g. `triton.compile(...)`) in a thread pool; returns each job's result or the
    exception it raised, in order. Measured on a 2-core CPU: 8 sm_90 compiles 2.9 s threaded, 3.0 s serial — the
    compile holds the GIL most of the time, so builds use CompilePool's processes instead."""
    jobs = list(jobs)
    workers = workers or min(len(jobs), os.cpu_count() or 1, 16) or 1

    def guarded(job):
        try:
            return job()
        except Exception as e:  # noqa: BLE001 - returned to the caller, who rejects that candidate with its reason
            return e
    if workers <= 1 or len(jobs) <= 1:
        return [guarded(j) for j in jobs]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(guarded, jobs))
