"""Training losses that appear in inference graphs: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss.

With x of shape (N, C, d1..dk) (log-probabilities, or logits for SCE) and integer targets t (N, d1..dk):

    l[n, d] = -w[t[n,d]] · x[n, t[n,d], d]            (w = 1 without weights; 0 where t == ignore_index)
    'none' → l,  'sum' → Σ l,  'mean' → Σ l / Σ w      (the weighted mean ONNX and torch define)

SoftmaxCrossEntropyLoss first takes log_softmax over axis 1 and can return it as a second output.
Traffic: one gather of N·D elements from x (plus one full read of x for the log_softmax), one write.
"""

import torch

from ..opspec import op


def _nll(logp, target, weight, ignore_index, reduction):
    target = target.to(logp.device).long()
    valid = torch.ones_like(target, dtype=torch.bool) if ignore_index is None else target != ignore_index
    safe = torch.where(valid, target, torch.zeros_like(target))
    picked = -torch.gather(logp, 1, safe.unsqueeze(1)).squeeze(1)
    w = torch.ones_like(picked) if weight is None else weight.to(logp)[safe]
    w = torch.where(valid, w, torch.zeros_like(w))
    loss = picked * w
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum().to(logp.dtype)
    if reduction == "mean":
        return (loss.sum() / w.sum()).to(logp.dtype)
    raise ValueError(f"unknown reduction {reduction!r}")


@op("NegativeLogLikelihoodLoss", attrs={"reduction": "mean", "ignore_index": None})
def negative_log_likelihood_loss(x, target, weight=None, reduction="mean", ignore_index=None):
    return _nll(x, target, weight, ignore_index, reduction)


@op("SoftmaxCrossEntropyLoss", attrs={"reduction": "mean", "ignore_index": None})
def softmax_cross_entropy_loss(scores, labels, weight=None, reduction="mean", ignore_index=None):
    """Returns (loss, log_prob); the layer declares one or two outputs."""
    log_prob = torch.log_softmax(scores, dim=1)
    return _nll(log_prob, labels, weight, ignore_index, reduction), log_prob
