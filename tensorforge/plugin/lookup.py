"""Which plugin an ONNX node means: (domain, op_type) plus TensorRT's `plugin_namespace` / `plugin_version`.

    resolve(domain, op_type, version=None, namespace=None) -> Plugin | None

1. Candidates: registered plugins whose name or alias is `op_type`; none → `loader.discover(op_type)` (library,
   then installed entry points) and look again; still none → None (the parser reports the op as unsupported).
2. `plugin_namespace` given → the candidate of that namespace; else the candidates that answer to `domain`
   (a plugin answers to its namespace, or to the `domains=` it registered with).
3. `plugin_version` given → that version; else the only version, or "1" among several (TensorRT's default).
A name that matches but a namespace/version that does not is a PluginError that lists what is registered.
`override_for` answers the parser's question before built-in importers run (TensorRT's plugin override).
"""

from ..util.errors import PluginError
from . import loader, registry
from .plugin import Plugin


def _describe(ps: list[Plugin]) -> str:
    return ", ".join(sorted(f"{p.id} v{p.version} (domains {list(p.domains)})" for p in ps))


def resolve(domain: str, op_type: str, version: str | None = None, namespace: str | None = None,
            where: str = "") -> Plugin | None:
    found = registry.named(op_type)
    if not found and loader.discover(op_type):
        found = registry.named(op_type)
    if not found:
        return None
    if namespace is not None:
        ns_match = [p for p in found if p.namespace == namespace]
        if not ns_match:
            raise PluginError(f"{where}no plugin {op_type} in namespace {namespace!r} (plugin_namespace); "
                              f"registered: {_describe(found)}", "fix plugin_namespace or register the plugin there")
    else:
        ns_match = [p for p in found if domain in p.domains]
        if not ns_match:
            raise PluginError(f"{where}no plugin {op_type} answers to ONNX domain {domain!r}; registered: "
                              f"{_describe(found)}",
                              "register it with domains=(...) or set plugin_namespace on the node")
    if version is not None:
        exact = [p for p in ns_match if p.version == str(version)]
        if not exact:
            raise PluginError(f"{where}plugin {ns_match[0].id} has no version {version!r} (plugin_version); "
                              f"registered versions: {', '.join(sorted(p.version for p in ns_match))}",
                              "register that version or export the node with a registered plugin_version")
        return exact[0]
    if len(ns_match) == 1:
        return ns_match[0]
    ones = [p for p in ns_match if p.version == "1"]
    if len({p.id for p in ns_match}) == 1 and ones:
        return ones[0]
    raise PluginError(f"{where}{op_type} matches several plugins: {_describe(ns_match)}",
                      "set plugin_version / plugin_namespace on the node to choose one")


def override_for(domain: str, op_type: str, attrs: dict) -> bool:
    """True when a node of a built-in op must go to a plugin: a registered plugin of that name asked to override
    it, or the node names a plugin explicitly with plugin_namespace / plugin_version."""
    if "plugin_namespace" in attrs or "plugin_version" in attrs:
        return bool(registry.named(op_type))
    return any(p.override and domain in p.domains for p in registry.named(op_type))
