import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("TRITON_INTERPRET", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(autouse=True)
def _deterministic_random_state():
    """Every test starts from the same torch/numpy random state, so a result never depends on test order."""
    torch.manual_seed(0)
    np.random.seed(0)
    yield
