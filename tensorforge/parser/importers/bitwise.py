"""Importers for BitShift, BitwiseAnd/Or/Xor/Not and BitCast: 1:1 onto the IR ops of the same name.

BitShift-11 and -28 share one IR op: 28 only adds signed types and pins down out-of-range shift amounts,
which for the unsigned types of -11 agree with what the IR op computes.
"""

from ...ir import dtype_name
from ..registry import importer
from ..tensors import torch_dtype


@importer("BitShift", versions=(11, 28))
def import_bit_shift(ctx, node, inputs):
    return [ctx.add1("BitShift", inputs, {"direction": node.attrs["direction"]})]


def _plain(ir_op):
    def fn(ctx, node, inputs):
        return [ctx.add1(ir_op, inputs)]
    return fn


for _op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot"):
    importer(_op, versions=(18,))(_plain(_op))


@importer("BitCast", versions=(26,))
def import_bit_cast(ctx, node, inputs):
    to = dtype_name(torch_dtype(node.attrs["to"], f"{node.where()}: "))
    return [ctx.add1("BitCast", inputs, {"to": to})]
