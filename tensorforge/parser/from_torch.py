"""nn.Module → ONNX bytes through torch.onnx.export (legacy TorchScript exporter or dynamo)."""

import io

import torch

from ..util.errors import ModelError


def export_module(module: torch.nn.Module, example_inputs, opset: int | None = None, dynamo: bool = False,
                  input_names=None, output_names=None, dynamic_axes=None) -> bytes:
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    module = module.eval()
    buf = io.BytesIO()
    try:
        if dynamo:
            prog = torch.onnx.export(module, tuple(example_inputs), dynamo=True, opset_version=opset or 18,
                                     input_names=input_names, output_names=output_names)
            return prog.model_proto.SerializeToString()
        torch.onnx.export(module, tuple(example_inputs), buf, dynamo=False, opset_version=opset or 17,
                          input_names=input_names, output_names=output_names, dynamic_axes=dynamic_axes)
    except Exception as e:  # noqa: BLE001 - exporter failures are reported in one line
        raise ModelError(f"torch.onnx.export failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                         "check that the module runs on the example inputs and uses exportable ops") from e
    return buf.getvalue()
