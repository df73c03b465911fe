"""Persistent, checked cache of compiled Triton kernels for builds, and parallel ahead-of-time compilation.

Entry points: `for_build(device_fp)` (context manager: Triton's cache directory points at
~/.cache/tensorforge/triton/<device>/ for the build, every entry checked first), `precompile(jobs, workers)`
(compile callables in a thread pool), `CompilePool` (the Triton kernels a candidate will launch, found by one
dry call and compiled in worker processes into the same folder), `prune_tile_configs(configs, m, n, k, ...)`.

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

from ..util.log import get_logger

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


def check(folder: str, only_indexed: bool = False) -> CacheCheck:
    """Delete every entry of `folder` that does not match the index; returns what was kept and removed.
    `only_indexed`: another build is running (its new entries are not indexed yet): keep unindexed entries."""
    result = CacheCheck()
    try:
        with open(os.path.join(folder, INDEX)) as f:
            index = json.load(f)
        if not isinstance(index, dict):
            raise ValueError("not an object")
    except FileNotFoundError:
        index = {}
    except (ValueError, OSError):
        index = {}                                   # an unreadable index trusts nothing
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
            state.pool = CompilePool(workers, folder) if workers > 0 else None
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


def _generated_text(module: str) -> str | None:
    """The source of a generated kernel module (kernels/generated.py names them tensorforge_kernel_<hash16>)."""
    if not module.startswith("tensorforge_kernel_"):
        return None
    from . import generated
    prefix = module[len("tensorforge_kernel_"):]
    for key, text in list(generated._SOURCES.items()):
        if key.startswith(prefix):
            return text
    return None


def discover(run) -> list[tuple]:
    """The Triton compiles `run()` would start, as jobs for `compile_job`, without compiling or launching them:
    Triton's jit_cache_hook sees each in-memory cache miss first and, answering True, skips it (the launch
    returns None; outputs of such a dry call are garbage and discarded). Errors of the dry call end discovery.
    A job is (module, kernel name, generated source or None, specialisation JSON with the target in it)."""
    from triton import knobs
    jobs: list[tuple] = []

    def hook(**kw):
        fn = kw["fn"]
        spec = json.loads(kw["compile"]["specialization_data"])
        if "target" not in spec:          # Triton ≤ 3.6 leaves the target out: the launching device's, as JIT uses
            spec["target"] = _current_target()
        jobs.append((fn.module, fn.name, _generated_text(fn.module), json.dumps(spec, sort_keys=True)))
        return True
    old = knobs.runtime.jit_cache_hook
    knobs.runtime.jit_cache_hook = hook
    try:
        run()
    except Exception:  # noqa: BLE001 - a dry call may fail on skipped launches; the jobs found so far still count
        pass
    finally:
        knobs.runtime.jit_cache_hook = old
    return jobs


def _decode_constant(value):
    import triton.language as tl
    if isinstance(value, str) and tl.dtype.is_dtype(value):
        return tl.dtype(value)
    if isinstance(value, dict) and "constexpr" in value:
        v = value["constexpr"]
        return tl.constexpr(tuple(v) if isinstance(v, list) else v)
    if isinstance(value, dict):
        raise ValueError(f"constant {value} cannot be compiled ahead of time")
    return tuple(value) if isinstance(value, list) else value


def _current_target() -> dict:
    from triton.runtime import driver
    t = driver.active.get_current_target()
    return {"backend": t.backend, "arch": t.arch, "warp_size": t.warp_size}


def _source(job: tuple):
    """(ASTSource, GPUTarget, options dict) of a discovered job, exactly as the launching process would compile it."""
    import importlib
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    module, name, text, spec = job
    if text is not None:
        from . import generated
        namespace = generated.load_module(generated.register_source(text))
    else:
        namespace = vars(importlib.import_module(module))
    fn = namespace[name]
    data = json.loads(spec)
    if "target" not in data:
        raise ValueError(f"job {name} names no target (discover() adds the launching device's)")
    constexprs = {tuple(k): _decode_constant(v) for k, v in zip(data["constant_keys"], data["constant_vals"])}
    attrs = {tuple(k): v for k, v in zip(data["attrs_keys"], data["attrs_vals"])}
    signature = {k: tuple(v) if isinstance(v, list) else v for k, v in data["signature"].items()}
    options = {k: tuple(v) if isinstance(v, list) else v for k, v in data["options"].items()}
    return ASTSource(fn, signature, constexprs, attrs), GPUTarget(**data["target"]), options


def job_key(job: tuple) -> tuple[str, bool]:
    """(Triton's cache hash of the job, whether TRITON_CACHE_DIR already holds it): the key triton.compile derives
    from the kernel's source (and its callees'), specialisation, options, target, Triton's version and its
    cache-invalidating environment — one variant, whichever layer asked for it."""
    import triton.compiler.compiler as tc
    src, target, options = _source(job)
    backend = tc.make_backend(target)
    opts = backend.parse_options(dict(options, **src.parse_options()))
    text = tc.get_cache_key(src, backend, opts, env_vars=tc.get_cache_invalidating_env_vars())
    key = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return key, tc.get_cache_manager(key).get_group(f"{src.name[:150]}.json") is not None


def compile_job(job: tuple) -> tuple[str, str, float]:
    """Compile one discovered kernel into TRITON_CACHE_DIR (in a worker: no GPU needed, the target is explicit).
    Returns (kernel name, its cache key, compile seconds). The same source, specialisation, options and target
    give the entry key the launching process computes, so its first launch loads the file instead of compiling."""
    import time
    import triton
    t0 = time.perf_counter()
    src, target, options = _source(job)
    triton.compile(src, target=target, options=options)
    return job[1], job_key(job)[0], time.perf_counter() - t0


def _init_worker(folder: str) -> None:
    os.environ["TRITON_CACHE_DIR"] = folder
    os.environ.pop("TRITON_INTERPRET", None)


def _reason(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"


class CompilePool:
    """Worker processes (spawned: the parent holds a CUDA context) that compile discovered jobs into `folder`.

    Jobs are identified by Triton's own cache key (`job_key`), so a variant asked for by many layers is compiled
    once per build, and one already in the folder not at all. `submit` returns at once (the workers compile in
    the background, e.g. every layer's candidates while the first layer is timed); `wait` blocks on some keys.
    The processes start with the first job that is not cached: a warm rebuild starts none."""

    def __init__(self, workers: int, folder: str):
        self.workers, self.folder = workers, folder
        self._pool = None
        self._futures: dict[str, object] = {}        # key → Future (None: it was in the cache already)
        self._names: dict[str, str] = {}              # key → kernel name
        self._ok: dict[str, bool] = {}                # key → usable, once its compile finished
        self.jobs = 0                                 # compiled by the workers
        self.cached = 0                               # distinct variants found already compiled
        self.compile_s = 0.0                          # the workers' compile seconds, summed
        self.failed: dict[str, str] = {}

    @property
    def variants(self) -> int:
        """Distinct kernel variants asked for so far (compiled, compiling, cached or failed)."""
        return len(self._futures)

    def _executor(self):
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor
            self._pool = ProcessPoolExecutor(max_workers=self.workers, initializer=_init_worker,
                                             mp_context=multiprocessing.get_context("spawn"), initargs=(self.folder,))
        return self._pool

    def submit(self, jobs: list[tuple]) -> list[str]:
        """Queue the jobs not yet known (by cache key) and not cached; returns the keys of `jobs` (a job whose
        key cannot be computed is in `failed`: its launch compiles it in-process)."""
        keys = []
        for job in jobs:
            try:
                key, cached = job_key(job)
            except Exception as e:  # noqa: BLE001 - reported in `failed`; the launch compiles the kernel itself
                self.failed[job[1]] = _reason(e)
                continue
            keys.append(key)
            if key in self._futures:
                continue
            self.cached += cached
            self._futures[key] = None if cached else self._executor().submit(compile_job, job)
            self._names[key] = job[1]
        return keys

    def wait(self, keys: list[str]) -> int:
        """Block until every key's compile finished; returns how many are usable (compiled or cached)."""
        ok = 0
        for key in keys:
            fut = self._futures.get(key)
            if fut is None:
                ok += key in self._futures
                continue
            if key not in self._ok:
                name = self._names.get(key, "?")
                try:
                    _, got, secs = fut.result()
                    self._ok[key] = got == key
                    if got != key:
                        self.failed[name] = f"the worker's cache key {got[:12]}… is not the parent's {key[:12]}…"
                    self.compile_s += secs
                    self.jobs += 1
                except Exception as e:  # noqa: BLE001 - in `failed`; the in-process compile is the fallback path
                    self._ok[key] = False
                    self.failed[name] = _reason(e)
            ok += self._ok[key]
        return ok

    def compile_all(self, jobs: list[tuple]) -> int:
        """Compile `jobs` (each variant once) in the workers, waiting for all; returns how many distinct variants
        are usable. A job that fails is kept in `failed` with its reason: the launch compiles that kernel itself
        (and fails the candidate with Triton's own error if it must)."""
        return self.wait(list(dict.fromkeys(self.submit(jobs))))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _pow2_at_least(v: int) -> int:
    return 1 << max(0, int(v) - 1).bit_length()


def prune_tile_configs(configs: list[dict], m: int, n: int, k: int, elem_bytes: int,
                       smem_limit: int | None = None) -> tuple[list[dict], dict[str, str]]:
    """GEMM-like tile configs (keys BM, BN, BK, stages, …) that cannot win an m×n×k problem, dropped before
    compiling. Two sound rules: shared memory stages·(BM·BK + BK·BN)·elem_bytes above the device's per-block
    limit cannot launch; and a config is dominated by another that equals it in every key except tile sizes,
    where each of its tiles is the same or smaller but still covers the problem's padded size (next power of
    two) — the larger tile only adds masked work on the same grid. Returns (kept, {config text: why});
    never drops every config."""
    dims = {"BM": _pow2_at_least(m), "BN": _pow2_at_least(n), "BK": _pow2_at_least(k)}
    text = lambda cfg: ",".join(f"{key}={cfg[key]}" for key in sorted(cfg))

    def dominated_by(a: dict, b: dict) -> bool:
        if a is b or {x: v for x, v in a.items() if x not in dims} != {x: v for x, v in b.items() if x not in dims}:
            return False
        if not all(key in a and key in b for key in dims):
            return False
        smaller = [key for key in dims if b[key] < a[key]]
        return bool(smaller) and all(b[key] == a[key] or dims[key] <= b[key] < a[key] for key in dims)
    kept, dropped = [], {}
    for cfg in configs:
        smem = cfg.get("stages", 1) * (cfg.get("BM", 0) * cfg.get("BK", 0) + cfg.get("BK", 0) * cfg.get("BN", 0)) * elem_bytes
        better = next((b for b in configs if dominated_by(cfg, b)), None)
        if smem_limit is not None and smem > smem_limit:
            dropped[text(cfg)] = f"needs {smem} B of shared memory, the device has {smem_limit} B"
        elif better is not None:
            dropped[text(cfg)] = (f"tiles exceed the problem ({m}×{n}×{k}); {text(better)} covers it with less "
                                  "masked work")
        else:
            kept.append(cfg)
    if not kept:
        return list(configs), {}
    return kept, dropped


def prune_block_configs(configs: list[dict], n: int) -> tuple[list[dict], dict[str, str]]:
    """Elementwise configs (keys BLOCK, warps, and variant switches) that cannot win on a tensor of `n` elements,
    dropped before compiling. Among configs equal in every key but BLOCK and warps whose BLOCK ≥ n (the whole
    tensor in one program), Triton gives each thread BLOCK / (32·warps) consecutive elements, so only
    ⌈n / that⌉ threads have work: one with fewer elements per thread (more threads working), or as many and a
    smaller BLOCK (fewer masked lanes), runs the same single program at least as fast. Returns (kept,
    {config text: why}); never drops every config."""
    text = lambda cfg: ",".join(f"{key}={cfg[key]}" for key in sorted(cfg))
    per_thread = lambda cfg: cfg["BLOCK"] / (32 * cfg.get("warps", 4))
    rest = lambda cfg: {k: v for k, v in cfg.items() if k not in ("BLOCK", "warps")}
    one_program = [c for c in configs if "BLOCK" in c and c["BLOCK"] >= n > 0]
    kept, dropped = [], {}
    for cfg in configs:
        better = next((b for b in one_program if b is not cfg and cfg in one_program and rest(b) == rest(cfg) and
                       (per_thread(b), b["BLOCK"]) < (per_thread(cfg), cfg["BLOCK"])), None)
        if better is None:
            kept.append(cfg)
        else:
            dropped[text(cfg)] = (f"one program covers the {n} elements; {text(better)} does too with "
                                  f"{per_thread(better):g} elements per thread instead of {per_thread(cfg):g}")
    return (kept, dropped) if kept else (list(configs), {})
