"""Importers for RandomNormal/Uniform(Like), Bernoulli, Multinomial (1/7/15 and 22: 22 adds bfloat16).

The `shape` attribute of RandomNormal/RandomUniform becomes a constant int64 input (it tells the kernel
which device to sample on); `dtype` attributes (ONNX element types) become dtype names.
"""

import torch

from ...ir import dtype_name
from ..registry import importer
from ..tensors import torch_dtype


def _attrs(node, names):
    out = {k: node.attrs[k] for k in names if k in node.attrs}
    if "dtype" in node.attrs:
        out["dtype"] = dtype_name(torch_dtype(node.attrs["dtype"], f"{node.where()}: "))
    return out


def _sized(ir_op, names):
    def fn(ctx, node, inputs):
        shape = ctx.const(list(node.attrs["shape"]), torch.int64, name="shape")
        return [ctx.add1(ir_op, [shape], _attrs(node, names))]
    return fn


def _like(ir_op, names):
    def fn(ctx, node, inputs):
        return [ctx.add1(ir_op, inputs, _attrs(node, names))]
    return fn


importer("RandomNormal", versions=(1, 22))(_sized("RandomNormal", ("mean", "scale", "seed")))
importer("RandomUniform", versions=(1, 22))(_sized("RandomUniform", ("low", "high", "seed")))
importer("RandomNormalLike", versions=(1, 22))(_like("RandomNormalLike", ("mean", "scale", "seed")))
importer("RandomUniformLike", versions=(1, 22))(_like("RandomUniformLike", ("low", "high", "seed")))
importer("Bernoulli", versions=(15, 22))(_like("Bernoulli", ("seed",)))
importer("Multinomial", versions=(7, 22))(_like("Multinomial", ("sample_size", "seed")))
