"""compare — Polygraphy-style checks: several runners on the same inputs, outputs compared with atol/rtol.

Entry point: `compare_model(model, runners=["onnxruntime", "tensorforge"], atol=1e-5, rtol=1e-5, per_layer=False)`
→ ComparisonReport (`.passed`, `.text()`, `.to_json()`; `report_html.write_html(report, path)`).
Runners (runners.py): tensorforge at fp32/fp16/bf16, an engine file, onnxruntime, onnx.reference, a torch nn.Module.
Inputs (data.py): seeded random or loaded from .npz/.npy. Statistics and pass/fail (comparator.py).
May import every room but cli; the only room that imports onnxruntime (lazily, inside its runner).
"""

from .comparator import OutputComparison, compare_arrays, compare_outputs
from .runners import (EngineFileRunner, OnnxReferenceRunner, OnnxRuntimeRunner, Runner, TensorforgeRunner,
                      TorchRunner, make_runner)
from .session import ComparisonReport, compare_model

__all__ = ["ComparisonReport", "EngineFileRunner", "OnnxReferenceRunner", "OnnxRuntimeRunner", "OutputComparison",
           "Runner", "TensorforgeRunner", "TorchRunner", "compare_arrays", "compare_model", "compare_outputs",
           "make_runner"]
