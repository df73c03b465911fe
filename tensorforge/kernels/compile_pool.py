"""Ahead-of-time Triton compiles in worker processes: find the kernels a call would compile, compile them elsewhere.

Entry points: `discover(run)` (the compiles `run()` would start, as jobs, nothing compiled or launched),
`job_key(job)` (Triton's own cache key of a job, and whether the cache holds it), `compile_job(job)` (what a worker
runs: no GPU needed, the target travels with the job), `CompilePool(workers, folder)` (spawned workers; each
variant compiled once per build; `submit` returns at once, `wait` blocks). The Triton cache folder and its
checks are kernels/compile_cache.py; a build's pool is created by its `for_build`.
"""

import hashlib
import json
import os
import sys
from contextlib import contextmanager


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
    key = _key(_key_inputs(job))
    return key, _in_cache(key, job[1])


def _key_inputs(job: tuple):
    import triton.compiler.compiler as tc
    src, target, options = _source(job)
    backend = tc.make_backend(target)
    opts = backend.parse_options(dict(options, **src.parse_options()))
    return src, backend, opts, tc.get_cache_invalidating_env_vars()


def _key(inputs) -> str:
    import triton.compiler.compiler as tc
    src, backend, opts, env = inputs
    return hashlib.sha256(tc.get_cache_key(src, backend, opts, env_vars=env).encode("utf-8")).hexdigest()


def _in_cache(key: str, kernel_name: str) -> bool:
    """Whether TRITON_CACHE_DIR holds the entry Triton looks up under `key` for that kernel."""
    import triton.compiler.compiler as tc
    return tc.get_cache_manager(key).get_group(f"{kernel_name[:150]}.json") is not None


def key_parts(job: tuple, inputs=None) -> dict[str, str]:
    """What a job's cache key is made of, part by part (Triton's own version key aside): the kernel function (its
    source, callees and constexpr globals), the specialisation (attributes, signature, constants), the backend
    (target and ptxas version), the options, the cache-invalidating environment. Two processes whose keys differ
    compare these to say why."""
    src, backend, opts, env = inputs or _key_inputs(job)
    constants = "-".join(getattr(v, "cache_key", None) or str(v) for _, v in sorted(src.constants.items()))
    return {"function": _function_detail(src.fn), "attributes": str(src.attrs), "signature": str(sorted(src.signature.items())),
            "constants": constants, "backend": backend.hash(), "options": opts.hash(),
            "environment": str(sorted(env.items()))}


def _function_detail(fn, depth: int = 2) -> str:
    """A JIT function's cache key with what it is made of, readable: its file and first line, its source's digest,
    the globals Triton recorded, and (to `depth`) the keys of the JIT functions it calls."""
    import ast
    key = fn.cache_key
    code = getattr(getattr(fn, "fn", None), "__code__", None)
    where = f"{code.co_filename if code else '?'}:{fn.starting_line_number}"
    used = {name: repr(value)[:40] for (name, _), (value, _) in getattr(fn, "used_global_vals", {}).items()}
    callees = {}
    if depth > 0:
        for node in ast.walk(fn.parse()):
            value = fn.__globals__.get(node.id) if isinstance(node, ast.Name) else None
            if value is not None and value is not fn and hasattr(value, "cache_key") and node.id not in callees:
                callees[node.id] = _function_detail(value, depth - 1)
    digest = hashlib.sha256(fn.src.encode("utf-8")).hexdigest()[:10]
    return f"{key[:16]} at {where} src {digest} globals {used} calls {callees}"


# The worker's own settings; every other TRITON_* variable travels with each job.
_WORKER_OWN = ("TRITON_CACHE_DIR", "TRITON_INTERPRET")


def triton_environment() -> dict[str, str]:
    """The parent's TRITON_* variables now. They reach the cache key (through the backend's ptxas version or the
    cache-invalidating knobs) and may change after the workers started: torch's inductor sets TRITON_PTXAS_PATH to
    its own ptxas the first time it compiles, which can happen midway through a build. So each job carries them."""
    return {k: v for k, v in os.environ.items() if k.startswith("TRITON_") and k not in _WORKER_OWN}


def _adopt_environment(env: dict[str, str]) -> None:
    for k in [k for k in os.environ if k.startswith("TRITON_") and k not in _WORKER_OWN and k not in env]:
        del os.environ[k]
    os.environ.update(env)


def compile_job(job: tuple, env: dict[str, str] | None = None,
                parent_key: str | None = None) -> tuple[str, str, float, dict[str, str] | None]:
    """Compile one discovered kernel into TRITON_CACHE_DIR (in a worker: no GPU needed, the target is explicit),
    under the parent's TRITON_* environment `env` when given. Returns (kernel name, its cache key, compile seconds,
    its key parts when the key is not `parent_key`, else None). The same source, specialisation, options, target and
    environment give the entry key the launching process computes, so its first launch loads the file instead of
    compiling."""
    import time
    import triton
    if env is not None:
        _adopt_environment(env)
    t0 = time.perf_counter()
    src, target, options = _source(job)
    triton.compile(src, target=target, options=options)
    secs = time.perf_counter() - t0
    inputs = _key_inputs(job)
    key = _key(inputs)
    return job[1], key, secs, (key_parts(job, inputs) if parent_key is not None and key != parent_key else None)


def _init_worker(folder: str) -> None:
    os.environ["TRITON_CACHE_DIR"] = folder
    os.environ.pop("TRITON_INTERPRET", None)


def _warm_worker() -> None:
    """A pre-started worker's first task: the imports every compile needs (torch, Triton's compiler, the kernel
    modules), done while the building process is still parsing and rewriting the network."""
    import triton.compiler  # noqa: F401
    from .. import kernels  # noqa: F401


def _reason(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"


@contextmanager
def _workers_skip_main():
    """While worker processes are spawned: the parent's `__main__` shows neither a file nor a module spec, so
    spawned children do not import it. Otherwise each child re-runs the user's script from the top (as
    `__mp_main__`): a build script written without an `if __name__ == "__main__":` guard — TensorRT samples'
    habit — built its model again in every worker, whose nested pool then failed (BrokenProcessPool) and every
    kernel compiled in the parent. The workers run only this module's functions, so they never need `__main__`.
    Restored on exit; the build's own thread is the only one spawning."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__spec__ = None
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)


class CompilePool:
    """Worker processes (spawned: the parent holds a CUDA context) that compile discovered jobs into `folder`.

    Jobs are identified by Triton's own cache key (`job_key`), so a variant asked for by many layers is compiled
    once per build, and one already in the folder not at all. `submit` returns at once (the workers compile in
    the background, e.g. every layer's candidates while the first layer is timed); `wait` blocks on some keys.
    The processes start with the first job that is not cached (a warm rebuild starts none), or all at once when
    pre-started (`prestart`, a CUDA build's first step)."""

    def __init__(self, workers: int, folder: str):
        self.workers, self.folder = workers, folder
        self._pool = None
        self._futures: dict[str, object] = {}        # key → Future (None: it was in the cache already)
        self._names: dict[str, str] = {}              # key → kernel name
        self._jobs: dict[str, tuple] = {}             # key → the job (to say why a worker's key differs)
        self._ok: dict[str, bool] = {}                # key → usable, once its compile finished
        self.jobs = 0                                 # compiled by the workers
        self.cached = 0                               # distinct variants found already compiled
        self.compile_s = 0.0                          # the workers' compile seconds, summed
        self.failed: dict[str, str] = {}             # kernel name → why (the caller may clear it after reporting)
        self.failures = 0                             # jobs that failed, over the whole build
        self.prestarted = False                       # workers spawned before the first job (prestart)

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

    def _spawn_submit(self, fn, *args):
        """The executor's submit, which is where it spawns its processes: with `__main__` out of their sight."""
        with _workers_skip_main():
            return self._executor().submit(fn, *args)

    def prestart(self) -> None:
        """Spawn every worker now, each importing what its compiles need (`_warm_worker`): a cold build's workers
        start while the parent parses and runs its passes (the 2-layer BERT on the H200: passes 4.2 s, then 4.2 s
        waiting for workers that were still starting), instead of at the first compile job."""
        for _ in range(self.workers):
            self._spawn_submit(_warm_worker)
        self.prestarted = True

    def backlog(self) -> int:
        """Compiles queued or running in the workers."""
        return sum(1 for f in self._futures.values() if f is not None and not f.done())

    def submit(self, jobs: list[tuple], new: bool = True) -> list[str]:
        """Queue the jobs not yet known (by cache key) and not cached; returns the keys of `jobs` to wait for (a
        job whose key cannot be computed is in `failed`; with `new` off, an unknown job is left out: in both
        cases its launch compiles it in-process)."""
        keys = []
        for job in jobs:
            try:
                key, cached = job_key(job)
            except Exception as e:  # noqa: BLE001 - reported in `failed`; the launch compiles the kernel itself
                self.failed[job[1]] = _reason(e)
                self.failures += 1
                continue
            if key in self._futures:
                keys.append(key)
                continue
            if not new and not cached:
                continue
            keys.append(key)
            self.cached += cached
            if cached:
                self._futures[key] = None
            else:
                self._futures[key] = self._spawn_submit(compile_job, job, triton_environment(), key)
            self._names[key] = job[1]
            self._jobs[key] = job
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
                    _, got, secs, parts = fut.result()
                    self._ok[key] = got == key or self._entry_present(key)
                    if not self._ok[key]:
                        self.failed[name] = (f"the worker's cache key {got[:12]}… is not the parent's {key[:12]}…"
                                             f"{self._why_keys_differ(key, parts)}")
                        self.failures += 1
                    self.compile_s += secs
                    self.jobs += 1
                except Exception as e:  # noqa: BLE001 - in `failed`; the in-process compile is the fallback path
                    self._ok[key] = False
                    self.failed[name] = _reason(e)
                    self.failures += 1
            ok += self._ok[key]
        return ok

    def _entry_present(self, key: str) -> bool:
        """Whether the cache folder holds the entry the parent's launch will look up under its own key (what counts,
        whatever key the worker reported)."""
        try:
            return _in_cache(key, self._names[key])
        except Exception:  # noqa: BLE001 - not present as far as this process can tell
            return False

    def _why_keys_differ(self, key: str, worker_parts: dict[str, str] | None) -> str:
        if worker_parts is None:
            return ""
        try:
            mine = key_parts(self._jobs[key])
        except Exception as e:  # noqa: BLE001 - only the explanation is lost
            return f" ({_reason(e)})"
        differ = [part for part in mine if mine[part] != worker_parts.get(part)]
        if not differ:
            return " (they differ in: Triton version)"
        first = differ[0]
        return (f" (they differ in: {', '.join(differ)}; {first}: parent {mine[first][:1200]!r}, "
                f"worker {str(worker_parts.get(first))[:1200]!r})")

    def compile_all(self, jobs: list[tuple], new: bool = True) -> int:
        """Compile `jobs` (each variant once) in the workers, waiting for all; returns how many distinct variants
        are usable. A job that fails is kept in `failed` with its reason: the launch compiles that kernel itself
        (and fails the candidate with Triton's own error if it must). `new` off: wait only for jobs already
        queued (a variant found now would wait behind the whole queue; its launch compiles it sooner)."""
        return self.wait(list(dict.fromkeys(self.submit(jobs, new))))

    def close(self) -> None:
        """Shut the workers down; a pre-started pool that never got a job (a warm build) does not wait for their
        imports to finish (they exit after them)."""
        if self._pool is not None:
            self._pool.shutdown(wait=bool(self._futures) or not self.prestarted, cancel_futures=True)
