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

_BY_VALUE: dict[tuple, torch.Tensor] = {}                     # (values, dtype, device) → table
_BY_LIST: dict[tuple, tuple[list, torch.Tensor]] = {}        # (id(list), dtype, device) → (that list, its table)


def attr_table(values, dtype: torch.dtype, device) -> torch.Tensor:
    """`torch.tensor(values, dtype=dtype, device=device)`, made on first use and shared afterwards. `values`: a
    flat list (or tuple) of numbers, as ONNX attributes hold them. A layer passes the same attribute list object on
    every call: that is found by identity (O(1) per call; the entry keeps the list alive, so its id is not reused);
    other lists by value (O(len) per call). Attribute lists are never modified after the build. Pass the layer's
    own list, never a copy made per call (`list(attr)`, a slice): each such copy would get an identity entry that
    keeps it alive, one per call."""
    device = torch.device(device)
    by_list = (id(values), dtype, device)
    hit = _BY_LIST.get(by_list)
    if hit is not None and hit[0] is values:
        return hit[1]
    key = (tuple(values), dtype, device)
    table = _BY_VALUE.get(key)
    if table is None:
        table = _BY_VALUE[key] = torch.tensor(key[0], dtype=dtype, device=device)
    if isinstance(values, list):
        _BY_LIST[by_list] = (values, table)
    return table
