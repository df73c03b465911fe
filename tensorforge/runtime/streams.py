"""Several execution contexts of one engine, each on its own CUDA stream (`--streams=N`, `--infStreams=N`).

Entry point: `StreamGroup(engine, n, device)`; `group.enqueue(i, feed)` starts inference i on context i % n and
returns at once (outputs are valid after `group.synchronize()` or `group.contexts[i].synchronize()`);
`group.run_all(feeds)` enqueues one call per feed round-robin and waits. The contexts share one device copy of the
weights; each has its own CUDA graphs (its own activations), so N streams cost N × activations, 1 × weights.
On the CPU there are no streams: contexts run one after another in the calling thread, which is what a caller of a
CPU engine gets from several streams anyway.
"""

import torch

from ..engine import Engine
from ..util.device import resolve_device
from ..util.errors import UsageError
from .context import ExecutionContext


class StreamGroup:
    def __init__(self, engine: Engine, streams: int, device=None, use_cuda_graph: bool | None = None):
        if int(streams) < 1:
            raise UsageError(f"--streams/--infStreams must be at least 1, got {streams}", "use --infStreams=1 or more")
        self.device = resolve_device(device)
        cuda = self.device.type == "cuda"
        self.contexts: list[ExecutionContext] = []
        for _ in range(int(streams)):
            stream = torch.cuda.Stream(self.device) if cuda else None
            shared = self.contexts[0].device_weights if self.contexts else None
            self.contexts.append(ExecutionContext(engine, self.device, use_cuda_graph=use_cuda_graph, stream=stream,
                                                  shared_weights=shared))
        self._next = 0

    def __len__(self) -> int:
        return len(self.contexts)

    def enqueue(self, feed: dict[str, torch.Tensor], index: int | None = None,
                copy_outputs: bool = False) -> dict[str, torch.Tensor]:
        """Start one inference on context `index` (default: round-robin). With graphs and `copy_outputs=False`, the
        outputs are that context's static buffers, valid until its next call with the same shapes."""
        if index is None:
            index, self._next = self._next, (self._next + 1) % len(self.contexts)
        return self.contexts[index % len(self.contexts)].run(feed, copy_outputs=copy_outputs)

    def synchronize(self) -> None:
        for ctx in self.contexts:
            ctx.synchronize()

    def run_all(self, feeds: list[dict[str, torch.Tensor]]) -> list[dict[str, torch.Tensor]]:
        """One call per feed, spread round-robin over the streams; waits for all; outputs are copies."""
        outs = [self.enqueue(f, i % len(self.contexts), copy_outputs=True) for i, f in enumerate(feeds)]
        self.synchronize()
        return outs
