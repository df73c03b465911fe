"""The two ai.onnx.ml outputs that are not numeric tensors: string class labels and ZipMap's sequence of maps.

    ClassLabelStrings  indices i (N,) int64, labels L  →  numpy array [L[i_0], …, L[i_N-1]] of Python str
                       (dtype object, what onnxruntime returns for a string tensor)
    ZipMap             probabilities P (N, C), keys K  →  [{K[0]: P[0,0], …, K[C-1]: P[0,C-1]}, …]: a Python list of
                       N dicts, values Python floats (from P's dtype), keys str or int as K is
Both are the last step of a classifier (the importer puts them there): the engine computes the indices and the
probability tensor as ever, and these layers only re-shape them into the Python values a user of skl2onnx's default
export expects (memory traffic: one device → host copy of the (N,) indices or the (N, C) probabilities, then
N·C Python objects). At build time their outputs are placeholders of unknown dtype (kind "strings" / "maps").
"""

import numpy as np
import torch

from .. import dynamic
from ..opspec import REQUIRED, op


@op("ClassLabelStrings", attrs={"labels": REQUIRED}, host_ok=False,
    infer=lambda idx, *, labels: dynamic.unknown(None, kind="strings"))
def class_label_strings(idx, *, labels):
    """idx (N,) class indices → numpy object array of the class names."""
    table = np.array(list(labels), dtype=object)
    return table[idx.detach().to("cpu", torch.int64).numpy()]


@op("ZipMap", attrs={"keys": REQUIRED}, host_ok=False, infer=lambda p, *, keys: dynamic.unknown(None, kind="maps"))
def zipmap(p, *, keys):
    """p (N, C) → N dicts {key: probability} (ai.onnx.ml ZipMap)."""
    if p.dim() != 2 or p.shape[1] != len(keys):
        raise ValueError(f"ZipMap takes (rows, {len(keys)}) probabilities, got shape {list(p.shape)}")
    keys = list(keys)
    return ([dict(zip(keys, row)) for row in p.detach().cpu().tolist()],)   # one output (a list is many outputs)
