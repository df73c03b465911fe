"""Activation functions. Pointwise: one read and one write per element.

Gelu(x) = x·½·(1 + erf(x/√2)) ('none') or x·½·(1 + tanh(√(2/π)·(x + 0.044715·x³))) ('tanh').
"""

import torch
import torch.nn.functional as F

from ..opspec import op


@op("Relu")
def relu(x): return torch.relu(x)


@op("Sigmoid")
def sigmoid(x): return torch.sigmoid(x)


@op("Tanh")
def tanh(x): return torch.tanh(x)


@op("LeakyRelu", attrs={"alpha": 0.01})
def leaky_relu(x, alpha): return F.leaky_relu(x, alpha)


@op("Elu", attrs={"alpha": 1.0})
def elu(x, alpha): return F.elu(x, alpha)


@op("Celu", attrs={"alpha": 1.0})
def celu(x, alpha): return F.celu(x, alpha)


@op("Selu", attrs={"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875})
def selu(x, alpha, gamma): return gamma * torch.where(x > 0, x, alpha * (torch.exp(x) - 1))


@op("ThresholdedRelu", attrs={"alpha": 1.0})
def thresholded_relu(x, alpha): return torch.where(x > alpha, x, torch.zeros_like(x))


@op("HardSigmoid", attrs={"alpha": 0.2, "beta": 0.5})
def hard_sigmoid(x, alpha, beta): return torch.clamp(alpha * x + beta, 0, 1)


@op("HardSwish")
def hard_swish(x): return x * torch.clamp(x / 6 + 0.5, 0, 1)


@op("Softplus")
def softplus(x): return F.softplus(x)


@op("Softsign")
def softsign(x): return x / (1 + torch.abs(x))


@op("Mish")
def mish(x): return x * torch.tanh(F.softplus(x))


@op("PRelu")
def prelu(x, slope): return torch.where(x >= 0, x, x * slope)


@op("Gelu", attrs={"approximate": "none"})
def gelu(x, approximate): return F.gelu(x, approximate=approximate)
