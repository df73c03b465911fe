"""What an engine says about its plugins, and the check that they are present before it runs.

`engine_records(layers)` → one JSON record per plugin used: id, namespace, name, version, IR op, each layer's
attributes, and what identifies the plugin that was used: its `signature` (inputs, outputs, attribute names and
types), its `origin` (the library module, or the file/module that registered it) and `library` (True for a
built-in). The builder stores them in `Engine.plugins`; never code. `ensure_registered(records, layers)` runs at
engine load: a plugin that is not registered is looked up in the library and installed entry points, and
otherwise fails in one line naming the plugin and how to load it; a registered plugin that is not the one the
engine was built with (another signature, or library vs. user) fails in one line naming both.
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
        rec = p.record(users)
        rec.update(signature=signature(p), origin=registry.SOURCES.get(p.key, "<python>"),
                   library=registry.is_library(p))
        out.append(rec)
    return out


def signature(p) -> dict[str, str]:
    """What the engine's layers depend on: input and output counts, attribute names with their types."""
    sig = {"$inputs": ",".join(n + ("?" if opt else "") for n, opt in p.inputs), "$outputs": str(p.num_outputs)}
    sig.update({name: t.name for name, (t, _) in p.attrs.items()})
    return sig


def _describe(sig: dict | None, origin: str, library: bool | None) -> str:
    where = "the built-in library" if library else (origin or "a user file")
    attrs = ", ".join(f"{k}: {v}" for k, v in (sig or {}).items() if not k.startswith("$")) or "none"
    return f"from {where} (attributes: {attrs})"


def _check_same(rec: dict, p) -> None:
    """The registered plugin must be the one the engine was built with (records without identity pass)."""
    if "signature" not in rec:
        return
    now_sig, now_lib = signature(p), registry.is_library(p)
    if now_sig == rec["signature"] and now_lib == rec.get("library", now_lib):
        return
    users = ", ".join(repr(u["name"]) for u in rec.get("layers", [])[:3])
    raise PluginError(f"the engine (layer {users}) was built with plugin {rec['id']} v{rec['version']} "
                      f"{_describe(rec['signature'], rec.get('origin', ''), rec.get('library'))}, but the registered "
                      f"{p.id} v{p.version} is another one: "
                      f"{_describe(now_sig, registry.SOURCES.get(p.key, ''), now_lib)}",
                      "register the plugin the engine was built with (load its file first), or rebuild the engine")


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
        if registry.by_op(op) is None:
            loader.discover(rec["name"])       # the library or an installed package; _check_same tells them apart
        p = registry.by_op(op)
        if p is not None:
            _check_same(rec, p)
            continue
        others = [p for p in registry.named(rec["name"]) if p.namespace == rec["namespace"]]
        have = f"; registered versions: {', '.join(sorted(p.version for p in others))}" if others else ""
        users = ", ".join(repr(u["name"]) for u in rec.get("layers", [])[:3])
        built = f", built with the one from {rec['origin']}" if rec.get("library") is False and rec.get("origin") else ""
        raise PluginError(f"the engine needs plugin {rec['id']} version {rec['version']} (layer {users}{built}), "
                          f"which is not registered{have}",
                          "load the file that registers it before loading the engine: tfp.load('my_plugins.py') "
                          "or tensorforge exec --staticPlugins=my_plugins.py")
