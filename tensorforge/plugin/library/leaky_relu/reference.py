"""Torch oracle for custom::LeakyReLU: torch.nn.functional.leaky_relu(x, alpha)."""

import torch


def leaky_relu_reference(x: torch.Tensor, alpha: float = 0.01) -> torch.Tensor:
    return torch.nn.functional.leaky_relu(x, alpha)
