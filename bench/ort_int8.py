"""onnxruntime's own INT8 on the same model, calibration inputs and test inputs: the yardstick beside our INT8 rows.

Entry point: `ort_int8_outputs(onnx_bytes, calib, test, threads)` → onnxruntime's outputs on `test` for the model
quantized by `onnxruntime.quantization.quantize_static`, in the placement tensorforge's implicit INT8 uses
(builder/calibration/qdq_insert.py): QDQ format, Conv/Gemm and MatMuls with a constant operand, weights per output
channel, activations per tensor, both symmetric (zero point 0), MinMax ranges from the `calib` samples (one at a
time). MatMuls of two computed tensors (attention) stay float, as ours do. The session runs with onnxruntime's
default optimisations (its int8 kernels). The cosine of these outputs to fp32 onnxruntime says how much a model
loses to per-tensor INT8 itself: a row whose own cosine misses 0.99 where this one misses it too misses it by the
quantization scheme, not by a kernel. Cost: one fp32 run per calibration sample plus one int8 run per test batch
on the CPU.
"""

import os
import tempfile

import numpy as np


def _float_matmuls(model) -> list[str]:
    """Names of MatMul nodes with no initializer operand (activation × activation: stays float)."""
    consts = {t.name for t in model.graph.initializer}
    consts |= {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    return [n.name for n in model.graph.node if n.op_type == "MatMul" and not any(i in consts for i in n.input)]


def ort_int8_outputs(onnx_bytes: bytes, calib: np.ndarray, test: np.ndarray, threads: int = 8,
                     batch: int = 8) -> np.ndarray:
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)

    class Feeds(CalibrationDataReader):
        def __init__(self):
            self.it = iter(calib[k:k + 1] for k in range(len(calib)))

        def get_next(self):
            x = next(self.it, None)
            return None if x is None else {"input": np.ascontiguousarray(x)}

    model = onnx.load_from_string(onnx_bytes)
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "fp32.onnx"), os.path.join(d, "int8.onnx")
        onnx.save(model, src)
        quantize_static(src, dst, Feeds(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        op_types_to_quantize=["Conv", "Gemm", "MatMul"], nodes_to_exclude=_float_matmuls(model),
                        calibrate_method=CalibrationMethod.MinMax,
                        extra_options={"ActivationSymmetric": True, "WeightSymmetric": True})
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        sess = ort.InferenceSession(dst, opts, providers=["CPUExecutionProvider"])
        return np.concatenate([sess.run(None, {"input": np.ascontiguousarray(test[k:k + batch])})[0]
                               for k in range(0, len(test), batch)])
