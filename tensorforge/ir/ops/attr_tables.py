"""Attribute lists as device tensors, made once per (values, dtype, device) and then reused by every call.

A reference that runs on every engine call and wrote `torch.tensor(attribute_list, device=x.device)` copied the
list host→device on each call; on CUDA that copy synchronises, so a CUDA-graph capture refuses the engine (the
classic-ML references: LinearClassifier/Regressor, SVM, Scaler, Imputer, OneHotEncoder, class-label tables). With
`attr_table` the first call makes the tensor (the runtime's warm-up runs and the build's graph check make one plain
run first) and later calls, a capture included, read that same tensor.

Tables are kept for the life of the process and never dropped: a captured CUDA graph holds their addresses, so a
table freed and its memory reused would change what a replay reads. Memory: one copy of each distinct attribute
list per device (the size of the classic-ML models' own attributes). Tables are read-only: no caller writes into one.
"""

import torch

_TABLES: dict[tuple, torch.Tensor] = {}


def attr_table(values, dtype: torch.dtype, device) -> torch.Tensor:
    """`torch.tensor(values, dtype=dtype, device=device)`, made on first use and shared afterwards. `values`: a
    flat list (or tuple) of numbers, as ONNX attributes hold them."""
    key = (tuple(values), dtype, torch.device(device))
    table = _TABLES.get(key)
    if table is None:
        table = _TABLES[key] = torch.tensor(key[0], dtype=dtype, device=key[2])
    return table
