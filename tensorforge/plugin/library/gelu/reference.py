"""Torch oracle for the GELU plugins: torch.nn.functional.gelu (exact erf form, or approximate='tanh')."""

import torch


def gelu_reference(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    return torch.nn.functional.gelu(x, approximate=approximate)
