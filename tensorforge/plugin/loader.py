"""Loading plugins: from a file or module (`load`), from installed packages (entry points), from the library.

    tfp.load("my_plugins.py")          # a file: executed, its @register calls take effect
    tfp.load("my_pkg.plugins")         # a module: imported (re-imported if its plugins were deregistered)
    [project.entry-points."tensorforge.plugins"]  my = "my_pkg.plugins"   # found by `discover`

Loading is idempotent: a source whose plugins are all still registered is not run again. `discover(op_type)`
is what the parser and the runtime call when nothing registered matches: it adds the in-tree library plugin
of that name (plugin/library/), then loads the installed entry points once.
"""

import importlib
import importlib.metadata
import importlib.util
import sys
from pathlib import Path

from ..util.errors import PluginError, TensorforgeError
from ..util.log import get_logger
from . import registry
from .library import LIBRARY

ENTRY_POINT_GROUP = "tensorforge.plugins"
_LOADED: dict[str, set] = {}          # source → keys it registered
_ENTRY_POINTS_DONE: set[str] = set()   # entry point names loaded in this process


def _still_there(source: str) -> bool:
    keys = _LOADED.get(source)
    return bool(keys) and all(k in registry._PLUGINS for k in keys)


def _run(source: str, action) -> list[str]:
    before = set(registry._PLUGINS)
    registry._SOURCE.append(source)
    try:
        action()
    except TensorforgeError:
        raise
    except SystemExit as e:
        raise PluginError(f"loading plugins from {source} called exit({e.code})", "remove the exit call") from e
    except Exception as e:  # noqa: BLE001 - user code: one line naming the source
        first = str(e).splitlines()[0] if str(e) else ""
        if isinstance(e, ModuleNotFoundError) and (e.name or "").split(".")[0] == "triton":
            raise PluginError(f"loading plugins from {source} failed: it imports Triton, which is not installed",
                              "pip install 'tensorforge[gpu]' (Triton kernels for CUDA GPUs); to load it on a "
                              "CPU-only install too, import triton inside the impl") from e
        raise PluginError(f"loading plugins from {source} failed: {type(e).__name__}: {first}",
                          "fix the plugin file; run with --verbose for the traceback") from e
    finally:
        registry._SOURCE.pop()
    added = set(registry._PLUGINS) - before
    _LOADED[source] = added
    ids = sorted(registry._PLUGINS[k].id for k in added)
    get_logger().verbose(f"plugins from {source}: {', '.join(ids) or 'none'}")
    return sorted(registry._PLUGINS[k].id for k in added)


def load(source) -> list[str]:
    """Load plugins from a .py file path or an importable module name; returns the ids it registered."""
    text = str(source)
    path = Path(text)
    if path.suffix in (".so", ".dll", ".dylib") or ".so." in path.name:
        raise PluginError(f"cannot load plugins from {text}: shared-library plugins are not loadable (tensorforge "
                          f"plugins are Python); built-in library plugins are: {', '.join(sorted(LIBRARY))}",
                          "write the plugin in Python (docs/plugins.md) and pass its .py file; built-in ones load "
                          "by themselves")
    if path.is_file() and path.suffix != ".py":
        raise PluginError(f"plugin file {text} is not a Python file (.py)",
                          "give --staticPlugins / tfp.load a .py file or an importable module name")
    if text.endswith(".py") or path.exists():
        if not path.is_file():
            raise PluginError(f"plugin file {text} does not exist",
                              "check the path given to --staticPlugins / tfp.load")
        key = str(path.resolve())
        if _still_there(key):
            return sorted(registry._PLUGINS[k].id for k in _LOADED[key])
        return _run(key, lambda: _exec_file(path))
    if _still_there(text):
        return sorted(registry._PLUGINS[k].id for k in _LOADED[text])
    try:
        spec = importlib.util.find_spec(text)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise PluginError(f"cannot load plugins from {text!r}: no such file or Python module",
                          "give a path to a .py file or an importable module name")
    return _run(text, lambda: _import(text, again=text in _LOADED))


def _exec_file(path: Path) -> None:
    name = f"tensorforge_user_plugins_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


def _import(name: str, again: bool) -> None:
    """Import `name`; run it again only when we loaded it before and its plugins were deregistered since."""
    if name in sys.modules and again:
        importlib.reload(sys.modules[name])
    else:
        importlib.import_module(name)


def load_library(op_type: str) -> bool:
    """Register the in-tree library plugin(s) named `op_type`; True if any was added."""
    entry = LIBRARY.get(op_type)
    if entry is None:
        return False
    module = importlib.import_module(f"{__package__}.library.{entry}")
    added = False
    registry._SOURCE.append(f"tensorforge.plugin.library.{entry}")
    try:
        for p in module.PLUGINS:
            if p.key not in registry._PLUGINS:
                registry.add(p, library=True)
                added = True
    finally:
        registry._SOURCE.pop()
    return added


def load_entry_points() -> list[str]:
    """Load every installed package's `tensorforge.plugins` entry point not loaded yet (or deregistered since)."""
    ids = []
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        source = f"entry point {ep.name} ({ep.value})"
        if ep.name in _ENTRY_POINTS_DONE and _still_there(source):
            continue
        module, _, attr = ep.value.partition(":")

        def action(module=module, attr=attr.strip(), again=source in _LOADED):
            _import(module.strip(), again)
            if attr:
                getattr(sys.modules[module.strip()], attr)()
        ids += _run(source, action)
        _ENTRY_POINTS_DONE.add(ep.name)
    return ids


def discover(op_type: str) -> bool:
    """Make plugins named `op_type` available if the library or an installed package has them."""
    if load_library(op_type):
        return True
    return bool(load_entry_points()) and bool(registry.named(op_type))
