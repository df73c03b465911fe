"""Importers for RNN, GRU and LSTM (7, 14, 22): 14 adds `layout`, 22 adds bfloat16; one IR op each.

Optional inputs keep their positions ('' where absent); the node's 2 (RNN/GRU) or 3 (LSTM) outputs
map to the IR op's outputs in order.
"""

from ..registry import importer

_ATTRS = ("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size", "layout")


def _recurrent(ir_op, extra=(), n_out=2):
    def fn(ctx, node, inputs):
        attrs = {k: node.attrs[k] for k in _ATTRS + extra if k in node.attrs}
        return ctx.add(ir_op, inputs, attrs, num_outputs=n_out)[:len(node.outputs)]
    return fn


importer("RNN", versions=(7, 14, 22))(_recurrent("RNN"))
importer("GRU", versions=(7, 14, 22))(_recurrent("GRU", ("linear_before_reset",)))
importer("LSTM", versions=(7, 14, 22))(_recurrent("LSTM", ("input_forget",), n_out=3))
