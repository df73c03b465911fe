"""Importers for Constant: the value becomes a network constant (weights), not a layer."""

import torch

from ..registry import importer


@importer("Constant", versions=(1, 9, 11, 12, 13, 19, 21, 23, 24, 25))
def import_constant(ctx, node, inputs):
    a = node.attrs
    if "value" in a:
        value = a["value"]
    elif "value_float" in a:
        value = torch.tensor(a["value_float"], dtype=torch.float32)
    elif "value_floats" in a:
        value = torch.tensor(a["value_floats"], dtype=torch.float32)
    elif "value_int" in a:
        value = torch.tensor(a["value_int"], dtype=torch.int64)
    elif "value_ints" in a:
        value = torch.tensor(a["value_ints"], dtype=torch.int64)
    else:
        raise ValueError("Constant with no supported value attribute (sparse and string values are not supported)")
    return [ctx.net.add_constant(node.outputs[0], value)]
