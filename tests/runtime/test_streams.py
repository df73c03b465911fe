"""Several contexts of one engine (--streams/--infStreams): shared weights, independent graphs, same results."""

import pytest
import torch

import tensorforge as tfg
from tensorforge.runtime.streams import StreamGroup
from tensorforge.util.errors import UsageError

from rt_models import affine_relu, reference_affine_relu


def test_stream_group_shares_weights_and_matches_reference():
    data = tfg.build(affine_relu(), device="cpu", shapes={"x": ((1, 4), (2, 4), (8, 4))}).data
    group = StreamGroup(data, 3, "cpu")
    assert len(group) == 3
    assert all(c.device_weights is group.contexts[0].device_weights for c in group.contexts)
    feeds = [{"x": torch.randn(b, 4)} for b in (1, 2, 3, 4, 5)]
    for feed, out in zip(feeds, group.run_all(feeds)):
        torch.testing.assert_close(out["y"], reference_affine_relu(feed["x"]))
    with pytest.raises(UsageError, match="at least 1"):
        StreamGroup(data, 0, "cpu")
