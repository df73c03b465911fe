"""What an engine says about its plugins, and the check that they are present before it runs.

`engine_records(layers)` → one JSON record per plugin used: id, namespace, name, version, IR op, and each
layer's attributes (the builder stores it in `Engine.plugins`; never code). `ensure_registered(records, layers)`
runs at engine load: a plugin that is not registered is looked up in the library and installed entry points,
and otherwise fails in one line naming the plugin and how to load it.
"""

from ..util.errors import PluginError
from . import loader, registry

PREFIX = "plugin:"


def engine_records(layers) -> list[dict]:
    by_op: dict[str, list] = {}
    for layer in layers:
        if layer.op.startswith(PREFIX):
            by_op.setdefault(layer.op, []).append(layer)
    out = []
    for op, users in sorted(by_op.items()):
        p = registry.by_op(op)
        if p is None:
            raise PluginError(f"layer {users[0].name!r} uses plugin op {op!r}, which is not registered",
                              "register the plugin before building")
        out.append(p.record(users))
    return out


def ensure_registered(records: list[dict], layers=()) -> None:
    """Raise PluginError unless every plugin the engine needs is registered (after library/entry-point discovery)."""
    needed = {r["op"]: r for r in records}
    for layer in layers:                       # engines that predate records still name their ops
        if layer.op.startswith(PREFIX) and layer.op not in needed:
            ident, _, version = layer.op[len(PREFIX):].rpartition(":")
            ns, _, name = ident.rpartition("::")
            needed[layer.op] = {"id": ident, "namespace": ns, "name": name, "version": version, "op": layer.op,
                                "layers": [{"name": layer.name}]}
    for op, rec in needed.items():
        if registry.by_op(op) is not None:
            continue
        loader.discover(rec["name"])
        if registry.by_op(op) is not None:
            continue
        others = [p for p in registry.named(rec["name"]) if p.namespace == rec["namespace"]]
        have = f"; registered versions: {', '.join(sorted(p.version for p in others))}" if others else ""
        users = ", ".join(repr(u["name"]) for u in rec.get("layers", [])[:3])
        raise PluginError(f"the engine needs plugin {rec['id']} version {rec['version']} (layer {users}), "
                          f"which is not registered{have}",
                          "load the file that registers it before loading the engine: tfp.load('my_plugins.py') "
                          "or tensorforge exec --staticPlugins=my_plugins.py")
