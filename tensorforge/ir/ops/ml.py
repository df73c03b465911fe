"""ai.onnx.ml ops that are cheap on tensors: Binarizer, ArrayFeatureExtractor, LabelEncoder (numeric keys
and values only). Linear models and preprocessing: ml_linear.py; SVMs: ml_svm.py; tree ensembles: ml_trees.py;
score transforms: ml_post.py.
"""

import math

import torch

from ..dtypes import dtype_from_name
from ..opspec import REQUIRED, op


@op("Binarizer", attrs={"threshold": 0.0})
def binarizer(x, *, threshold=0.0):
    """1 where x > threshold, else 0, in x's dtype."""
    return (x > threshold).to(x.dtype)


@op("ArrayFeatureExtractor", value_inputs=(1,))
def array_feature_extractor(x, indices):
    """x[..., indices] (indices flattened); a 1-D x gives one row, as onnxruntime does."""
    index = indices.reshape(-1).to(x.device).long()
    out = x.index_select(x.dim() - 1, index)
    return out.reshape(1, -1) if x.dim() == 1 else out


@op("LabelEncoder", attrs={"keys": REQUIRED, "values": REQUIRED, "default": REQUIRED, "out_dtype": REQUIRED})
def label_encoder(x, *, keys, values, default, out_dtype):
    """y = values[i] where x == keys[i], else default (numeric keys and values; NaN keys match NaN)."""
    out = torch.full(x.shape, default, dtype=dtype_from_name(out_dtype), device=x.device)
    for k, v in zip(keys, values):
        hit = torch.isnan(x) if isinstance(k, float) and math.isnan(k) else x == k
        out = out.masked_fill(hit, v)      # a Python scalar: no host tensor copied to the device
    return out
