"""The score transforms and label rules shared by the ai.onnx.ml classifiers (Linear, SVM, TreeEnsemble).

post_transform (per row of scores s, in float64):
    NONE s · LOGISTIC 1/(1+e^-s) · SOFTMAX e^(s-max)/Σ · SOFTMAX_ZERO like SOFTMAX but |s| ≤ 1e-7 entries count as
    exactly zero (weight s·e^-max, a row of zeros gives ½ everywhere) · PROBIT √2·erfinv(2s−1), with erfinv the
    closed-form approximation onnxruntime uses (a = 0.147), not the exact inverse.
Labels are class indices mapped through the integer class labels (string labels never reach an engine).
"""

import math

import torch

from .attr_tables import attr_table

TRANSFORMS = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")
_NO_LABELS = [0]


def _erfinv_approx(x: torch.Tensor) -> torch.Tensor:
    sgn = torch.where(x < 0, -1.0, 1.0).to(x.dtype)
    w = (1.0 - x) * (1.0 + x)
    log = torch.log(w)
    v = 2.0 / (math.pi * 0.147) + 0.5 * log
    r = sgn * torch.sqrt(-v + torch.sqrt(v * v - log / 0.147))
    return torch.where(w == 0, torch.zeros_like(x), r)


def probit(p: torch.Tensor) -> torch.Tensor:
    return 1.41421356 * _erfinv_approx(p * 2 - 1)


def softmax_zero(s: torch.Tensor) -> torch.Tensor:
    vmax = s.amax(dim=1, keepdim=True)
    nz = s.abs() > 1e-7
    e = torch.where(nz, torch.exp(s - vmax), s * torch.exp(-vmax))
    tot = e.sum(dim=1, keepdim=True)
    return torch.where(tot == 0, torch.full_like(e, 0.5), e / torch.where(tot == 0, torch.ones_like(tot), tot))


def post_transform(s: torch.Tensor, kind: str) -> torch.Tensor:
    """Apply one of TRANSFORMS to a (N, C) score matrix."""
    if kind == "NONE":
        return s
    if kind == "LOGISTIC":
        return torch.sigmoid(s)
    if kind == "SOFTMAX":
        return torch.softmax(s, dim=1)
    if kind == "SOFTMAX_ZERO":
        return softmax_zero(s)
    if kind == "PROBIT":
        return probit(s)
    raise ValueError(f"unknown post_transform {kind!r}; known: {', '.join(TRANSFORMS)}")


def labels_of(index: torch.Tensor, classlabels: list[int]) -> torch.Tensor:
    """Class index → int64 class label."""
    table = attr_table(classlabels or _NO_LABELS, torch.int64, index.device)   # the layer's own list: found by id
    return table[index.long()]
