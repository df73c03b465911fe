"""When a plugin impl runs its Triton kernel, and small launch helpers shared by the library's kernels.

`use_triton(x)`: True on CUDA tensors, and on CPU tensors when TRITON_INTERPRET=1 (Triton's interpreter; this is
how CI checks every kernel against its reference). Otherwise the impl runs its torch path: an impl never
pretends — which path ran is decided here, from the device and the environment, and nowhere else.
"""

import functools
import importlib.util
import os

import torch


@functools.cache
def triton_available() -> bool:
    return importlib.util.find_spec("triton") is not None


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def use_triton(x: torch.Tensor) -> bool:
    if not triton_available():
        return False
    return x.device.type == "cuda" or (x.device.type == "cpu" and interpreting())


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()
