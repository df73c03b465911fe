"""ai.onnx.ml SVMClassifier / SVMRegressor (libsvm layout, as skl2onnx writes SVC/SVR/NuSVC…), float64 math.

Kernel K(x, v): LINEAR x·v · POLY (γ x·v + c₀)^d · RBF exp(−γ‖x−v‖²) · SIGMOID tanh(γ x·v + c₀).
Regressor: y = Σⱼ αⱼ K(x, vⱼ) + ρ₀ (one_class: sign, ±1); without support vectors y = x·α + ρ₀.
Classifier (one-vs-one): for classes i < j, s_ij = ρ_e + Σ_{v∈i} α[j−1, v] K(x, v) + Σ_{v∈j} α[i, v] K(x, v);
s_ij > 0 votes i, else j; label = the class with most votes (first on ties). The scores output is the pairwise
s (one column for two classes, written as (−s, s)), after post_transform. Platt probabilities (prob_a/prob_b)
are not implemented: the importer refuses them with that reason.
"""

import torch

from ..opspec import REQUIRED, op
from .attr_tables import attr_table
from .ml_post import labels_of
from .ml_post import post_transform as apply_post


def kernel_matrix(x, sv, kind: str, params) -> torch.Tensor:
    """(N, F) × (V, F) → (N, V) kernel values."""
    gamma, coef0, degree = (list(params) + [0.0, 0.0, 0.0])[:3] if params else (0.0, 0.0, 0.0)
    kind = kind.upper()
    if kind == "RBF":
        return torch.exp(-gamma * torch.cdist(x, sv).square())
    dot = x @ sv.T
    if kind == "LINEAR":
        return dot
    if kind == "POLY":
        return (dot * gamma + coef0) ** int(degree)
    if kind == "SIGMOID":
        return torch.tanh(dot * gamma + coef0)
    raise ValueError(f"unknown SVM kernel_type {kind!r}")


def _rbf_exact(x, sv, gamma):
    return torch.exp(-gamma * (x.unsqueeze(1) - sv.unsqueeze(0)).square().sum(-1))


def _kernel(x, sv, kind, params):
    if kind.upper() == "RBF":        # cdist's ‖x‖²+‖v‖²−2x·v form loses digits; the difference form is exact-ish
        return _rbf_exact(x, sv, (list(params) + [0.0])[0] if params else 0.0)
    return kernel_matrix(x, sv, kind, params)


@op("SVMRegressor", attrs={"coefficients": REQUIRED, "kernel_params": None, "kernel_type": "LINEAR",
                           "n_supports": 0, "one_class": 0, "post_transform": "NONE", "rho": REQUIRED,
                           "support_vectors": None},
    infer=lambda x, **_: torch.empty(x.shape[0], 1, dtype=torch.float32, device="meta"))
def svm_regressor(x, *, coefficients, kernel_params=None, kernel_type="LINEAR", n_supports=0, one_class=0,
                  post_transform="NONE", rho, support_vectors=None):
    xd = x.to(torch.float64)
    coef = attr_table(coefficients, torch.float64, x.device)
    if n_supports > 0:
        sv = attr_table(support_vectors, torch.float64, x.device).reshape(n_supports, -1)
        y = _kernel(xd, sv, kernel_type, kernel_params) @ coef + rho[0]
    else:
        y = xd @ coef + rho[0]
    if one_class:
        y = torch.where(y > 0, 1.0, -1.0).to(y.dtype)
    return apply_post(y.reshape(-1, 1), post_transform).to(torch.float32)


def _pairs(n):
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


def _infer_cls(x, *, classlabels_ints, vectors_per_class=None, **_):
    c = len(classlabels_ints)
    cols = c if not vectors_per_class else max(2, c * (c - 1) // 2)
    return (torch.empty(x.shape[0], dtype=torch.int64, device="meta"),
            torch.empty(x.shape[0], cols, dtype=torch.float32, device="meta"))


@op("SVMClassifier", attrs={"classlabels_ints": REQUIRED, "coefficients": REQUIRED, "kernel_params": None,
                            "kernel_type": "LINEAR", "post_transform": "NONE", "rho": REQUIRED,
                            "support_vectors": None, "vectors_per_class": None}, infer=_infer_cls)
def svm_classifier(x, *, classlabels_ints, coefficients, kernel_params=None, kernel_type="LINEAR",
                   post_transform="NONE", rho, support_vectors=None, vectors_per_class=None):
    xd = x.to(torch.float64)
    n_classes = len(classlabels_ints)
    coef = attr_table(coefficients, torch.float64, x.device)
    if not vectors_per_class:                           # liblinear: one row of weights per class, ρ₀ for all
        s = xd @ coef.reshape(n_classes, -1).T + rho[0]
        p = apply_post(s, post_transform)
        return labels_of(p.argmax(1), classlabels_ints), p.to(torch.float32)
    n_sv = sum(vectors_per_class)
    sv = attr_table(support_vectors, torch.float64, x.device).reshape(n_sv, -1)
    k = _kernel(xd, sv, kernel_type, kernel_params)                  # (N, V)
    coef = coef.reshape(-1, n_sv)
    start = [sum(vectors_per_class[:i]) for i in range(n_classes)]
    pairs = _pairs(n_classes)
    w = torch.zeros(n_sv, len(pairs), dtype=torch.float64, device=x.device)
    for e, (i, j) in enumerate(pairs):
        si, ni, sj, nj = start[i], vectors_per_class[i], start[j], vectors_per_class[j]
        w[si:si + ni, e] = coef[j - 1, si:si + ni]
        w[sj:sj + nj, e] = coef[i, sj:sj + nj]
    s = k @ w + attr_table(rho, torch.float64, x.device)[:len(pairs)]
    votes = torch.zeros(x.shape[0], n_classes, dtype=torch.float64, device=x.device)
    for e, (i, j) in enumerate(pairs):
        votes[:, i] += (s[:, e] > 0).double()
        votes[:, j] += (s[:, e] <= 0).double()
    labels = labels_of(votes.argmax(1), classlabels_ints)
    if s.shape[1] == 1:
        s = torch.cat([-s, s], dim=1)
    return labels, apply_post(s, post_transform).to(torch.float32)
