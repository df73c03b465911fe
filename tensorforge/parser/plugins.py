"""Bridge from the parser to the plugin registry: an ONNX node becomes one plugin layer.

`import_plugin_node(ctx, node, inputs)` is called for nodes with no built-in importer; it returns None when no
plugin answers to the node's (domain, op_type) (the parser then reports the op as unsupported).
`override_importer(node)` is asked first for every node: it returns an importer when a plugin overrides the
built-in op (registered with override=True, or the node carries plugin_namespace / plugin_version), like
TensorRT's plugin-override parser flag. Attributes arrive typed per the plugin's descriptor; plugin_version and
plugin_namespace select the plugin and are not passed on. When every input shape is static the descriptor is
run here, so a descriptor error names the node; otherwise it first runs at build time.
"""

from ..plugin import Plugin, TensorDesc, override_for, resolve
from ..util.errors import PluginError

_SELECTORS = ("plugin_version", "plugin_namespace")


def _selector(node, name):
    value = node.attrs.get(name)
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode()
    if not isinstance(value, (str, int)):
        raise PluginError(f"{node.where()}: {name} must be a string, got {type(value).__name__}",
                          f"export {name} as a string attribute")
    return str(value)


def import_plugin_node(ctx, node, inputs):
    where = f"{node.where()}: "
    p = resolve(node.domain, node.op_type, _selector(node, "plugin_version"), _selector(node, "plugin_namespace"),
                where=where)
    if p is None:
        return None
    return _add_layer(ctx, node, inputs, p, where)


def override_importer(node):
    """An importer that sends this built-in node to a plugin, or None."""
    if not override_for(node.domain, node.op_type, node.attrs):
        return None
    return import_plugin_node


def _add_layer(ctx, node, inputs, p: Plugin, where: str) -> list[str]:
    if p.impl_fn is None and p.reference_fn is None:
        raise PluginError(f"{where}plugin {p.id} has neither @impl nor @reference", "register an implementation")
    if len(inputs) > len(p.inputs):
        raise PluginError(f"{where}plugin {p.id} takes {len(p.inputs)} inputs ({', '.join(n for n, _ in p.inputs)}), "
                          f"the node has {len(inputs)}", "check the exporter's inputs against the descriptor")
    raw = {k: v for k, v in node.attrs.items() if k not in _SELECTORS}
    explicit = {k for k in node.explicit_attrs if k not in _SELECTORS}
    attrs = p.typed_attrs(raw, where, strict_keys=explicit)
    if not p.num_outputs - p.optional_outputs <= len(node.outputs) <= p.num_outputs:
        opt = f" ({p.optional_outputs} of them optional)" if p.optional_outputs else ""
        raise PluginError(f"{where}plugin {p.id} has {p.num_outputs} outputs{opt}, the node has {len(node.outputs)}",
                          "check the exporter's outputs against the descriptor")
    _check_static(ctx, inputs, p, attrs, where)
    outs = ctx.add(p.op_name, inputs, attrs, num_outputs=max(len(node.outputs), 1))
    return outs


def _check_static(ctx, inputs, p: Plugin, attrs: dict, where: str) -> None:
    descs = []
    for name in inputs:
        if not name:
            descs.append(None)
            continue
        info = ctx.info(name)
        value = ctx.constant_value(name)
        if value is not None:
            descs.append(TensorDesc(tuple(value.shape), value.dtype, value))
        elif info is not None and info.dtype is not None and info.is_static:
            descs.append(TensorDesc(info.shape, info.dtype))
        else:
            return                                  # shapes known only at build time
    try:
        p.describe(descs, attrs)
    except PluginError as e:
        raise PluginError(f"{where}{e.message}", e.hint) from e
