"""A CUDA-graph capture that fails half-way (runtime/cuda_graph.py) leaves torch's CUDA random generator usable.

On the H100 one uncapturable engine (a NonZero, capture attempted because other threads were alive) made every
later `normal_()` on the device raise "Offset increment outside graph capture encountered unexpectedly" for the
rest of the process: seven GPU tests after it failed in their timed builds. Oracle: torch's own RNG, which must
draw after the failed capture, and a capture of a well-behaved function afterwards that replays correctly."""

import pytest
import torch

from tensorforge.runtime.cuda_graph import CaptureFailed, TorchGraphBackend

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_cuda_failed_capture_leaves_the_random_generator_usable():
    dev = torch.device("cuda", torch.cuda.current_device())
    backend = TorchGraphBackend(dev)
    x = torch.ones(1024, device=dev)

    def syncs():
        y = x * 2
        if y.sum().item() > 0:           # a host read: illegal under capture
            return y
        return x

    with pytest.raises(CaptureFailed):
        backend.capture(syncs)
    drawn = torch.randn(4096, device=dev)           # raised before the fix
    assert 0.9 < float(drawn.std()) < 1.1
    out = torch.empty_like(x)
    graph, _ = backend.capture(lambda: out.copy_(x * 3))
    x.fill_(2.0)
    backend.replay(graph)
    torch.cuda.synchronize(dev)
    assert torch.equal(out, torch.full_like(x, 6.0))
