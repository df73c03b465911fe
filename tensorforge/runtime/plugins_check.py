"""Before an engine runs: every plugin it calls must be registered in this process.

Engines name plugins (id, version, attributes) but never contain their code, so loading one that needs a plugin
nobody registered fails here, in one line naming the plugin and how to load it (`plugin.ensure_registered`),
instead of later as an unknown op. Library plugins and installed entry points are found automatically.
"""

from ..engine import Engine
from ..plugin import ensure_registered


def check_plugins(engine: Engine) -> Engine:
    ensure_registered(list(engine.plugins or []), engine.layers)
    return engine
