"""ai.onnx.preview.training optimizer steps: Adagrad, Adam, Momentum (one update of N tensors).

Inputs are (R, T, X1..XN, G1..GN, state1..stateN[, second state…]); outputs the new X's then the new
states. With g' = g + λ·x (λ = norm_coefficient):
    Adagrad:  h' = h + g'², x' = x − R/(1 + T·decay) · g' / (√h' + ε)
    Adam:     v' = α v + (1−α) g', h' = β h + (1−β) g'², R̂ = R·√(1−β^T)/(1−α^T) (T > 0, else R),
              x' = (1 − λ_post)·(x − R̂ · v' / (√h' + ε))
    Momentum: v' = α v + (β if T > 0 else 1) g';  standard x' = x − R v',  nesterov x' = x − R (g' + α v')
Elementwise: each tensor element is read and written once per state. Computed in float64, stored back in
each tensor's dtype.
"""

import math

import torch

from ..opspec import op


def _groups(data, per):
    n = (len(data) - 2) // per
    r, t = float(data[0].reshape(-1)[0]), int(data[1].reshape(-1)[0])
    return r, t, [data[2 + i * n:2 + (i + 1) * n] for i in range(per)]


@op("Adagrad", attrs={"decay_factor": 0.0, "epsilon": 0.0, "norm_coefficient": 0.0})
def adagrad(*data, decay_factor=0.0, epsilon=0.0, norm_coefficient=0.0):
    r, t, (xs, gs, hs) = _groups(data, 3)
    rate = r / (1 + t * decay_factor)
    new_x, new_h = [], []
    for x, g, h in zip(xs, gs, hs):
        gr = norm_coefficient * x.double() + g.double()
        h2 = h.double() + gr * gr
        new_x.append((x.double() - rate * gr / (torch.sqrt(h2) + epsilon)).to(x.dtype))
        new_h.append(h2.to(h.dtype))
    return (*new_x, *new_h)


@op("Adam", attrs={"alpha": 0.9, "beta": 0.999, "epsilon": 0.0, "norm_coefficient": 0.0, "norm_coefficient_post": 0.0})
def adam(*data, alpha=0.9, beta=0.999, epsilon=0.0, norm_coefficient=0.0, norm_coefficient_post=0.0):
    r, t, (xs, gs, vs, hs) = _groups(data, 4)
    rate = r * math.sqrt(1 - beta ** t) / (1 - alpha ** t) if t > 0 else r
    outs_x, outs_v, outs_h = [], [], []
    for x, g, v, h in zip(xs, gs, vs, hs):
        gr = norm_coefficient * x.double() + g.double()
        v2 = alpha * v.double() + (1 - alpha) * gr
        h2 = beta * h.double() + (1 - beta) * gr * gr
        x2 = (1 - norm_coefficient_post) * (x.double() - rate * v2 / (torch.sqrt(h2) + epsilon))
        outs_x.append(x2.to(x.dtype))
        outs_v.append(v2.to(v.dtype))
        outs_h.append(h2.to(h.dtype))
    return (*outs_x, *outs_v, *outs_h)


@op("Momentum", attrs={"alpha": 0.9, "beta": 1.0, "mode": "standard", "norm_coefficient": 0.0})
def momentum(*data, alpha=0.9, beta=1.0, mode="standard", norm_coefficient=0.0):
    r, t, (xs, gs, vs) = _groups(data, 3)
    b = beta if t > 0 else 1.0
    outs_x, outs_v = [], []
    for x, g, v in zip(xs, gs, vs):
        gr = norm_coefficient * x.double() + g.double()
        v2 = alpha * v.double() + b * gr
        step = v2 if mode == "standard" else gr + alpha * v2
        outs_x.append((x.double() - r * step).to(x.dtype))
        outs_v.append(v2.to(v.dtype))
    return (*outs_x, *outs_v)
