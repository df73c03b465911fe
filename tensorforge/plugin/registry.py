"""The plugin registry: (namespace, name, version) → Plugin, and the decorators users write.

    @register("custom::MyGelu")            # creates the Plugin and its IR OpSpec
    @impl("custom::MyGelu") / @reference(...) / @autotune(...)

Rules (TensorRT's registry): a (namespace, name, version) registered twice raises, naming where the first came
from; to replace a plugin, `deregister` it first. Library plugins (TensorRT's "standard plugins") are registered
lazily, only when a model or engine needs a name nothing registered answers to, so a user plugin registered
first simply keeps its key and the library's is never loaded. Engines record which one they used
(records.py) and refuse to load against the other. `scope()` undoes every registration made inside it (tests). Listeners (`subscribe`) hear every change: kernels/ turns
plugins into tactics that way, since this room may not import kernels.
"""

from contextlib import contextmanager
from typing import Callable

from ..ir.opspec import has_spec, register_spec, unregister_spec
from ..util.errors import PluginError
from ..util.log import get_logger
from .plugin import Plugin, split_id

_PLUGINS: dict[tuple[str, str, str], Plugin] = {}
_LIBRARY: set[tuple[str, str, str]] = set()          # keys whose plugin came from plugin/library
_LISTENERS: list[Callable[[Plugin, bool], None]] = []
_SOURCE: list[str] = []                               # the module/file being loaded (loader.py pushes it)
SOURCES: dict[tuple[str, str, str], str] = {}         # key → where it was registered from


def subscribe(listener: Callable[[Plugin, bool], None]) -> None:
    """`listener(plugin, present)` is called on every add/change (present=True) and removal (False)."""
    _LISTENERS.append(listener)
    for p in list(_PLUGINS.values()):
        listener(p, True)


def _notify(p: Plugin, present: bool) -> None:
    for listener in _LISTENERS:
        listener(p, present)


def add(p: Plugin, library: bool = False) -> Plugin:
    """Register `p`. Returns the plugin that is registered under its key afterwards."""
    old = _PLUGINS.get(p.key)
    if old is p:
        return p
    if old is not None:
        if library and p.key not in _LIBRARY:
            get_logger().verbose(f"plugin {p.id} v{p.version}: the library's is not loaded, the one registered "
                                 f"from {SOURCES.get(p.key, 'unknown')} stays")
            return old
        first = ("the built-in plugin library" if p.key in _LIBRARY else "") or SOURCES.get(p.key, "unknown")
        raise PluginError(f"plugin {p.id} version {p.version} is registered twice (first from {first}; now from "
                          f"{_SOURCE[-1] if _SOURCE else '<python>'})",
                          f"deregister the first with tfp.deregister({p.id!r}, {p.version!r}), or register yours "
                          "under another version or namespace")
    if has_spec(p.op_name):
        raise PluginError(f"plugin {p.id}: IR op {p.op_name!r} already exists", "choose another name or namespace")
    register_spec(p.spec())
    _PLUGINS[p.key] = p
    if library:
        _LIBRARY.add(p.key)
    SOURCES[p.key] = _SOURCE[-1] if _SOURCE else "<python>"
    p.on_change = lambda plugin: _notify(plugin, True)
    _notify(p, True)
    return p


def remove(p: Plugin | str, version: str | None = None) -> None:
    """Deregister a plugin (object, or id and optional version)."""
    if isinstance(p, str):
        p = get(p, version)
    if _PLUGINS.get(p.key) is not p:
        return
    del _PLUGINS[p.key]
    _LIBRARY.discard(p.key)
    SOURCES.pop(p.key, None)
    p.on_change = None
    unregister_spec(p.op_name)
    _notify(p, False)


deregister = remove


def registered() -> list[Plugin]:
    return sorted(_PLUGINS.values(), key=lambda p: p.key)


def is_library(p: Plugin) -> bool:
    return p.key in _LIBRARY


def find(plugin_id: str, version: str | None = None) -> Plugin | None:
    ns, name = split_id(plugin_id)
    if version is not None:
        return _PLUGINS.get((ns, name, str(version)))
    found = [p for (n, m, _), p in _PLUGINS.items() if (n, m) == (ns, name)]
    if len(found) > 1:
        raise PluginError(f"plugin {plugin_id} is registered in versions {sorted(p.version for p in found)}",
                          "say which one with version=")
    return found[0] if found else None


def get(plugin_id: str, version: str | None = None) -> Plugin:
    p = find(plugin_id, version)
    if p is None:
        v = f" version {version}" if version is not None else ""
        raise PluginError(f"plugin {plugin_id}{v} is not registered",
                          "register it with @tensorforge.plugin.register or load it with tfp.load('file.py')")
    return p


def by_op(op_name: str) -> Plugin | None:
    """The plugin behind an IR op name, or None."""
    return next((p for p in _PLUGINS.values() if p.op_name == op_name), None)


def named(op_type: str) -> list[Plugin]:
    """Every registered plugin whose name or alias is `op_type`."""
    return [p for p in _PLUGINS.values() if op_type == p.name or op_type in p.aliases]


# ---- the decorator API ------------------------------------------------------------------------------
def register(plugin_id: str, version: str = "1", *, domains=None, aliases=(), override: bool = False,
             num_outputs: int | None = None, optional_outputs: int = 0):
    """Decorator on a descriptor: typed inputs (TensorDesc) then attributes with defaults → output TensorDesc(s).

    `domains`: ONNX domains this plugin answers to (default: its namespace); `aliases`: other op_types;
    `override=True`: replace the built-in importer of an ONNX op of the same name (TensorRT's plugin override);
    `optional_outputs`: how many trailing outputs an ONNX node may leave out (a node with fewer outputs than the
    descriptor's others is a build error).
    """
    def wrap(descriptor):
        add(Plugin(plugin_id, descriptor, version, domains=domains, aliases=aliases, override=override,
                   num_outputs=num_outputs, optional_outputs=optional_outputs))
        return descriptor
    return wrap


def impl(plugin_id: str, version: str | None = None):
    return get(plugin_id, version).impl


def reference(plugin_id: str, version: str | None = None):
    return get(plugin_id, version).reference


def autotune(plugin_id: str, version: str | None = None):
    return get(plugin_id, version).autotune


@contextmanager
def scope():
    """Registrations made inside are undone on exit, and plugins replaced inside are restored (tests)."""
    before = dict(_PLUGINS)
    lib_before = set(_LIBRARY)
    sources = dict(SOURCES)
    try:
        yield
    finally:
        for key, p in list(_PLUGINS.items()):
            if before.get(key) is not p:
                remove(p)
        for key, p in before.items():
            if key not in _PLUGINS:
                _SOURCE.append(sources.get(key, "<python>"))
                try:
                    add(p, library=key in lib_before)
                finally:
                    _SOURCE.pop()
