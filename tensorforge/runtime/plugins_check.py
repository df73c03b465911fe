"""Before an engine runs: every plugin it calls must be registered in this process.

Engines name plugins (id, version, attributes) but never contain their code, so loading one that needs a plugin
nobody registered fails here, in one line naming the plugin and how to load it (`plugin.ensure_registered`),
instead of later as an unknown op. Library plugins and installed entry points are found automatically.
An engine read from a file whose plugin ops were unknown while it was read gets its layers' inference
cross-check (engine/serialize.py `check_semantics`) here, once the plugins are there.
"""

from ..engine import Engine
from ..engine.serialize import check_semantics
from ..plugin import ensure_registered


def check_plugins(engine: Engine) -> Engine:
    ensure_registered(list(engine.plugins or []), engine.layers)
    if getattr(engine, "_needs_semantic_check", False):
        check_semantics(engine, f"engine {engine.name!r}")
        engine._needs_semantic_check = False
    return engine
