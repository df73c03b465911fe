"""Kernels compiled from generated source text (codegen/), keyed by the SHA-256 of the text.

The builder registers every source it generated (`register_sources`); the runtime registers an engine's
`kernel_sources` before instantiating its layers, so loading compiles from the stored text and never re-runs
passes or codegen. The store is content-addressed — a hash names exactly one text — so one store per
process is safe to share between engines.

An engine file is data, yet this text is executed (by Triton, and by Python under TRITON_INTERPRET=1), so it
is checked first: the module may import only `triton` and `triton.language as tl`, define only
`@triton.jit` functions and constant assignments, and the functions may only call `tl.*`, each other and
tensor methods, with no dunder attributes and no imports — the shape codegen produces, nothing else.
"""

import ast
import hashlib
import linecache

from ..util.errors import EngineFileError

_SOURCES: dict[str, str] = {}
_MODULES: dict[str, dict] = {}


class UnsafeSource(EngineFileError):
    """A kernel source that is not of the shape codegen produces."""


def source_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def register_sources(sources: dict[str, str]) -> None:
    """Add `{hash: text}`; a text whose hash does not match its key is refused."""
    for key, text in sources.items():
        if source_hash(text) != key:
            raise UnsafeSource(f"kernel source {key[:12]}… does not match its hash (engine file modified?)")
        _SOURCES[key] = text


def has_source(key: str) -> bool:
    return key in _SOURCES


_ALLOWED_IMPORTS = {("triton", None), ("triton.language", "tl")}
_STMTS = (ast.Assign, ast.AugAssign, ast.If, ast.Return, ast.Expr, ast.Pass)


def _check_function(fn: ast.FunctionDef, jit_names: set[str]) -> None:
    deco = fn.decorator_list
    if len(deco) != 1 or ast.unparse(deco[0]) != "triton.jit":
        raise UnsafeSource(f"function {fn.name!r} is not a plain @triton.jit kernel")
    if fn.args.defaults or fn.args.kw_defaults or fn.args.vararg or fn.args.kwarg:
        raise UnsafeSource(f"function {fn.name!r} has defaults or variadic arguments")
    for node in ast.walk(fn):
        if isinstance(node, ast.stmt) and node is not fn and not isinstance(node, _STMTS):
            raise UnsafeSource(f"statement {type(node).__name__} is not allowed in {fn.name!r}")
        if isinstance(node, ast.Expr) and not isinstance(node.value, (ast.Constant, ast.Call)):
            raise UnsafeSource(f"expression statement in {fn.name!r}")
        if isinstance(node, ast.Name) and node.id.startswith("__"):
            raise UnsafeSource(f"name {node.id!r} is not allowed in {fn.name!r}")
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise UnsafeSource(f"attribute {node.attr!r} is not allowed in {fn.name!r}")
        if isinstance(node, (ast.Lambda, ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Starred)):
            raise UnsafeSource(f"{type(node).__name__} is not allowed in {fn.name!r}")
        if isinstance(node, ast.Call):
            f = node.func
            ok = ((isinstance(f, ast.Name) and f.id in jit_names) or
                  (isinstance(f, ast.Attribute) and (f.attr == "to" or
                                                     (isinstance(f.value, ast.Name) and f.value.id == "tl"))))
            if not ok:
                raise UnsafeSource(f"call of {ast.unparse(f)!r} is not allowed in {fn.name!r}")


def check_source(text: str) -> None:
    """Raise UnsafeSource unless `text` has the shape of a generated kernel module."""
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        raise UnsafeSource(f"kernel source does not parse: {e}") from e
    jit_names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (alias.name, alias.asname) not in _ALLOWED_IMPORTS:
                    raise UnsafeSource(f"import of {alias.name!r} is not allowed in a kernel source")
        elif isinstance(node, ast.Assign):
            if not isinstance(node.value, ast.Constant) or not all(isinstance(t, ast.Name) for t in node.targets):
                raise UnsafeSource("only constant assignments are allowed at module level")
        elif isinstance(node, ast.FunctionDef):
            _check_function(node, jit_names)
        elif not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            raise UnsafeSource(f"statement {type(node).__name__} is not allowed at module level")


def load_module(key: str) -> dict:
    """The namespace of the registered source `key`, checked and executed once per process."""
    if key in _MODULES:
        return _MODULES[key]
    text = _SOURCES.get(key)
    if text is None:
        raise KeyError(f"generated kernel {key[:12]}… is not registered (is the engine's kernel_sources intact?)")
    check_source(text)
    filename = f"<tensorforge-kernel-{key[:16]}>"
    # Triton reads the source of each @jit function back through inspect/linecache
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace: dict = {"__name__": f"tensorforge_kernel_{key[:16]}"}
    exec(compile(text, filename, "exec"), namespace)  # noqa: S102 - checked above: only @triton.jit code
    _MODULES[key] = namespace
    return namespace
