"""Importers for onnxruntime's quantized contrib ops QGemm and DynamicQuantizeLSTM (com.microsoft, version 1), as
quantize_static (QOperator format, Gemm) and quantize_dynamic (LSTM) write them. Both are their own IR ops
(ir/ops/contrib_quant.py) with onnxruntime's CPU rounding; the inputs pass through in onnxruntime's order.

    QGemm(A, a_scale, a_zp, B, b_scale, b_zp, C?, y_scale?, y_zp?; alpha, transA, transB)
    DynamicQuantizeLSTM(X, W, R, B?, sequence_lens?, initial_h?, initial_c?, P?, W_scale, W_zp, R_scale, R_zp; LSTM's
                        attributes without layout)  → Y, Y_h, Y_c
With sequence_lens, onnxruntime's per-step H quantization sees a finished entry's row as 0 when Y is an output and as
its last state when not; the importer records which (attribute y_output).
Refused with a reason: QGemm with y_scale but no y_zp; DynamicQuantizeLSTM with int8 weights whose zero point is
not 0.
"""

import torch

from ...util.errors import UnsupportedOpError
from ..registry import importer

MS = "com.microsoft"


def _present(inputs, i):
    return len(inputs) > i and bool(inputs[i])


@importer("QGemm", versions=(1,), domain=MS)
def import_qgemm(ctx, node, inputs):
    """Quantized Gemm (own IR op): exact int32 accumulator + int32 C, scaled (float Y) or requantized as MLAS does."""
    if _present(inputs, 7) != _present(inputs, 8):
        raise UnsupportedOpError(f"{node.where()}: QGemm with only one of y_scale / y_zero_point",
                                 "give both for a quantized output, or neither for a float output")
    a = node.attrs
    attrs = {"alpha": float(a.get("alpha", 1.0)), "transA": int(a.get("transA", 0)), "transB": int(a.get("transB", 0))}
    return [ctx.add1("QGemm", list(inputs), attrs)]


_LSTM_ATTRS = ("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size",
               "input_forget")


@importer("DynamicQuantizeLSTM", versions=(1,), domain=MS)
def import_dynamic_quantize_lstm(ctx, node, inputs):
    """int8/uint8 LSTM, X / H quantized to uint8 per call / per step as onnxruntime does (H: whole batch; own IR op)."""
    if len(inputs) < 12 or not all(inputs[i] for i in (8, 9, 10, 11)):
        raise UnsupportedOpError(f"{node.where()}: DynamicQuantizeLSTM needs W_scale, W_zero_point, R_scale and "
                                 "R_zero_point (inputs 8–11)", "re-run onnxruntime's quantize_dynamic")
    for w_i, zp_i, what in ((1, 9, "W"), (2, 11, "R")):
        info, zp = ctx.info(inputs[w_i]), ctx.constant_value(inputs[zp_i])
        if info is not None and info.dtype == torch.int8 and zp is not None and bool((zp != 0).any()):
            raise UnsupportedOpError(f"{node.where()}: int8 {what} with a non-zero zero point",
                                     "onnxruntime's DynamicQuantizeLSTM requires zero points of 0 for int8 weights")
    attrs = {k: node.attrs[k] for k in _LSTM_ATTRS if k in node.attrs}
    attrs["y_output"] = int(bool(node.outputs and node.outputs[0]))     # onnxruntime's H quantization depends on it
    outs = ctx.add("DynamicQuantizeLSTM", list(inputs), attrs, num_outputs=3)
    return outs[:max(1, len(node.outputs))]
