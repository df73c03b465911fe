"""Library plugin tests compare each Triton kernel with its torch reference: on CPU that needs Triton's
interpreter, so the tests insist that the Triton path is the one that runs (tests/conftest.py sets
TRITON_INTERPRET=1 before anything imports triton)."""

import pytest
import torch

from tensorforge.plugin import use_triton


@pytest.fixture(autouse=True)
def triton_path_runs():
    assert use_triton(torch.empty(1)), "TRITON_INTERPRET=1 is not set: the Triton kernels would not run on CPU"
    yield
