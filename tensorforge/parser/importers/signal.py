"""Importers for DFT (17: axis attribute, 20: axis input), STFT, the window functions and MelWeightMatrix.

DFT-17's `axis` attribute becomes the constant third input of the one IR op (ONNX-20 form); its default
there is 1, against -2 for DFT-20's absent input. `output_datatype` (ONNX element type) becomes a dtype name.
"""

import torch

from ...ir import dtype_name
from ..registry import importer
from ..tensors import torch_dtype


@importer("DFT", versions=(17,))
def import_dft_17(ctx, node, inputs):
    dft_length = inputs[1] if len(inputs) > 1 else ""
    axis = ctx.const(int(node.attrs.get("axis", 1)), torch.int64, name="axis")
    attrs = {k: node.attrs[k] for k in ("inverse", "onesided") if k in node.attrs}
    return [ctx.add1("DFT", [inputs[0], dft_length, axis], attrs)]


@importer("DFT", versions=(20,))
def import_dft_20(ctx, node, inputs):
    attrs = {k: node.attrs[k] for k in ("inverse", "onesided") if k in node.attrs}
    return [ctx.add1("DFT", inputs, attrs)]


@importer("STFT", versions=(17,))
def import_stft(ctx, node, inputs):
    return [ctx.add1("STFT", inputs, {"onesided": node.attrs.get("onesided", 1)})]


def _typed(ir_op, extra=()):
    def fn(ctx, node, inputs):
        attrs = {k: node.attrs[k] for k in extra if k in node.attrs}
        attrs["output_datatype"] = dtype_name(torch_dtype(node.attrs.get("output_datatype", 1), f"{node.where()}: "))
        return [ctx.add1(ir_op, inputs, attrs)]
    return fn


for _op in ("HannWindow", "HammingWindow", "BlackmanWindow"):
    importer(_op, versions=(17,))(_typed(_op, ("periodic",)))
importer("MelWeightMatrix", versions=(17,))(_typed("MelWeightMatrix"))
