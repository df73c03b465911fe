"""Generated kernels by the SHA-256 of their source: the text, and its compiled module once asked for.

Entry points: `register_source(text) -> hash` (the builder and the runtime, with text codegen/ has just produced in
this process), `has_source(hash)`, `load_module(hash) -> namespace` (the tactic, kernels/triton_pointwise.py).
No text from an engine file ever reaches this store: an engine holds a chain's program and the hash, and the runtime
regenerates the text from the program (runtime/kernel_regen.py) before any layer is prepared. Python compiles the
text once per process per hash; Triton's @jit reads it back through linecache and compiles it for the GPU on first
launch (its own cache is keyed by the text too). Content-addressed, so one store per process serves every engine.
"""

import hashlib
import linecache
import threading

_SOURCES: dict[str, str] = {}
_MODULES: dict[str, dict] = {}
_LOCK = threading.Lock()


def source_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def register_source(text: str) -> str:
    """Keep `text` (generated in this process by codegen/) under its hash; returns the hash."""
    key = source_hash(text)
    with _LOCK:
        _SOURCES.setdefault(key, text)
    return key


def has_source(key: str) -> bool:
    return key in _SOURCES


def load_module(key: str) -> dict:
    """The namespace of the registered source `key`, compiled once per process."""
    module = _MODULES.get(key)
    if module is not None:
        return module
    with _LOCK:
        if key in _MODULES:
            return _MODULES[key]
        text = _SOURCES.get(key)
        if text is None:
            raise KeyError(f"generated kernel {key[:12]}… was not generated in this process "
                           "(the runtime regenerates every chain's source when a context is created)")
        filename = f"<tensorforge-kernel-{key[:16]}>"
        # Triton reads the source of each @jit function back through inspect/linecache
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        namespace: dict = {"__name__": f"tensorforge_kernel_{key[:16]}"}
        exec(compile(text, filename, "exec"), namespace)  # noqa: S102 - text codegen/ produced in this process
        _MODULES[key] = namespace
        return namespace
