"""ai.onnx.ml linear models and preprocessing, as onnxruntime computes them (float outputs, float64 math here).

    LinearRegressor   y = x·Wᵀ + b                       (W: targets × F)
    LinearClassifier  s = x·Wᵀ + b, one row per class; a single row with two labels scores (−s, s);
                      post_transform (ml_post.py); label = arg-max class (one column: s ≥ 0, or ≥ ½ after a transform)
    Scaler            (x − offset)·scale                 Normalizer  x / max|x|, Σ|x| or ‖x‖₂ per row
    Imputer           replaced_value (NaN by default) → imputed value per column
    OneHotEncoder     x (…) → (…, C) with 1 at the category's position, all zeros for an unknown one
    FeatureVectorizer each input cut or zero-padded to its inputdimensions, then concatenated
"""

import torch

from ..opspec import REQUIRED, op
from .attr_tables import attr_table
from .ml_post import labels_of
from .ml_post import post_transform as apply_post


def _f64(x):
    return x.to(torch.float64)


@op("LinearRegressor", attrs={"coefficients": REQUIRED, "intercepts": None, "targets": 1, "post_transform": "NONE"},
    infer=lambda x, *, targets=1, **_: torch.empty(x.shape[0], targets, dtype=torch.float32, device="meta"))
def linear_regressor(x, *, coefficients, intercepts=None, targets=1, post_transform="NONE"):
    w = attr_table(coefficients, torch.float64, x.device).reshape(targets, -1)
    y = _f64(x).reshape(x.shape[0], -1) @ w.T
    if intercepts:
        y = y + attr_table(intercepts, torch.float64, x.device)
    return apply_post(y, post_transform).to(torch.float32)


def _classifier_scores(x, coefficients, intercepts, n_classes):
    w = attr_table(coefficients, torch.float64, x.device).reshape(-1, x.shape[-1])
    s = _f64(x).reshape(x.shape[0], -1) @ w.T
    if intercepts:
        s = s + attr_table(intercepts, torch.float64, x.device)
    if s.shape[1] == 1 and n_classes == 2:
        s = torch.cat([-s, s], dim=1)
    return s


def _infer_linear_cls(x, *, coefficients, classlabels_ints, **_):
    rows = len(coefficients) // x.shape[-1]
    cols = 2 if rows == 1 and len(classlabels_ints) == 2 else rows
    return (torch.empty(x.shape[0], dtype=torch.int64, device="meta"),
            torch.empty(x.shape[0], cols, dtype=torch.float32, device="meta"))


@op("LinearClassifier", attrs={"coefficients": REQUIRED, "intercepts": None, "classlabels_ints": REQUIRED,
                               "multi_class": 0, "post_transform": "NONE"}, infer=_infer_linear_cls)
def linear_classifier(x, *, coefficients, intercepts=None, classlabels_ints, multi_class=0, post_transform="NONE"):
    s = _classifier_scores(x, coefficients, intercepts, len(classlabels_ints))
    p = apply_post(s, post_transform)
    if p.shape[1] > 1:
        labels = labels_of(p.argmax(1), classlabels_ints)
    else:
        hit = p[:, 0] >= (0.0 if post_transform == "NONE" else 0.5)
        labels = torch.where(hit, int(classlabels_ints[0]) if classlabels_ints else 1, 0).to(torch.int64)
    return labels, p.to(torch.float32)


def _per_column(values, x):
    t = attr_table(values, torch.float64, x.device)
    return t if t.numel() == 1 else t.reshape(1, -1)


@op("Scaler", attrs={"offset": None, "scale": None},
    infer=lambda x, **_: torch.empty(x.shape, dtype=torch.float32, device="meta"))
def scaler(x, *, offset=None, scale=None):
    y = _f64(x)
    if offset:
        y = y - _per_column(offset, x)
    if scale:
        y = y * _per_column(scale, x)
    return y.to(torch.float32)


@op("Normalizer", attrs={"norm": "MAX"},
    infer=lambda x, **_: torch.empty(x.shape, dtype=torch.float32, device="meta"))
def normalizer(x, *, norm="MAX"):
    y = _f64(x)
    if norm == "MAX":
        d = y.abs().amax(dim=1, keepdim=True)
    elif norm == "L1":
        d = y.abs().sum(dim=1, keepdim=True)
    elif norm == "L2":
        d = y.square().sum(dim=1, keepdim=True).sqrt()
    else:
        raise ValueError(f"Normalizer norm {norm!r} is not MAX, L1 or L2")
    return (y / d.clamp_min(1e-30)).to(torch.float32)


@op("Imputer", attrs={"imputed_values": REQUIRED, "replaced_value": None})
def imputer(x, *, imputed_values, replaced_value=None):
    """replaced_value None stands for NaN (engine manifests are JSON, which has no NaN)."""
    fill = attr_table(imputed_values, x.dtype, x.device)
    fill = fill if fill.numel() == 1 else fill.reshape(1, -1).expand_as(x)
    hit = torch.isnan(x) if replaced_value is None else x == replaced_value
    return torch.where(hit, fill, x)


@op("OneHotEncoder", attrs={"cats": REQUIRED},
    infer=lambda x, *, cats, **_: torch.empty(*x.shape, len(cats), dtype=torch.float32, device="meta"))
def one_hot_encoder(x, *, cats):
    table = attr_table(cats, torch.float64, x.device)
    return (_f64(x).unsqueeze(-1) == table).to(torch.float32)


def _infer_fv(*xs, inputdimensions):
    return torch.empty(xs[0].shape[0], sum(inputdimensions), dtype=torch.float32, device="meta")


@op("FeatureVectorizer", attrs={"inputdimensions": REQUIRED}, infer=_infer_fv)
def feature_vectorizer(*xs, inputdimensions):
    parts = []
    for x, width in zip(xs, inputdimensions):
        x = _f64(x).reshape(x.shape[0], -1)
        if x.shape[1] >= width:
            parts.append(x[:, :width])
        else:
            parts.append(torch.cat([x, x.new_zeros(x.shape[0], width - x.shape[1])], dim=1))
    return torch.cat(parts, dim=1).to(torch.float32)
