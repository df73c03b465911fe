"""EngineCall: the per-call path of a compiled graph, as thin as an ExecutionContext with bound inputs.

    call = EngineCall(engine, arg_names, feeds, outputs, as_tuple)
    call(*graph_args)                  # the graph's placeholders in order (dynamo passes parameters too)

Made once: the positions of the fed placeholders among the graph's arguments, and (per thread, on first call)
an ExecutionContext with CUDA graphs on where the engine can be captured (the context decides; its reason is
logged when it cannot). A call whose input signature (shapes, dtypes) has a captured graph copies the inputs
into that graph's static buffers (no copy when they are those buffers), replays it and clones each output out
of the static buffers (the next replay overwrites them): a copy per input, one launch, a copy per output — the
same device work as `Engine.run`, without its dict building, pool, re-validation and second gate. Any other call
(first sight of a shape, CPU, an engine that cannot be captured) goes through `ExecutionContext.run`, which
checks the inputs, picks the profile and captures. Weights are the engine's: changing the module's parameters
in place after compiling does not reach the engine (as with inductor's frozen weights).
"""

import threading

import torch

from ..api import Engine
from ..runtime import ExecutionContext
from ..runtime.cuda_gate import CUDA_GATE
from ..util.errors import UsageError


def graph_backend(device: torch.device):
    """The capture backend for new contexts: None = the runtime's own (CUDA graphs on CUDA, none on CPU).
    The seam tests use to fake capture on the CPU (tests/frontend_torch)."""
    return None


class EngineCall(torch.nn.Module):
    """Runs one engine: takes every placeholder of its graph positionally, feeds the network inputs."""

    def __init__(self, engine: Engine, arg_names: list[str], feeds: list[str], outputs: list[str], as_tuple: bool):
        super().__init__()
        self.engine, self.arg_names, self.feeds, self.outputs = engine, arg_names, feeds, outputs
        self.as_tuple = as_tuple
        index = {n: i for i, n in enumerate(arg_names)}
        missing = [f for f in feeds if f not in index]
        if missing:
            raise UsageError(f"engine input(s) {missing} are not arguments of the graph", "rebuild the module")
        self._positions = [index[f] for f in feeds]
        self._signature_names = list(feeds)
        self._local = threading.local()
        self._first: ExecutionContext | None = None
        self._lock = threading.Lock()

    # one context per thread (a context runs in one thread at a time); later ones share the device weights
    def context(self) -> ExecutionContext:
        ctx = getattr(self._local, "ctx", None)
        if ctx is None:
            with self._lock:
                data, device = self.engine.data, self.engine.device
                shared = self._first.device_weights if self._first is not None else None
                ctx = ExecutionContext(data, device, graph_backend=graph_backend(device), shared_weights=shared)
                if self._first is None:
                    self._first = ctx
            self._local.ctx = ctx
        return ctx

    def forward(self, *args):
        if len(args) != len(self.arg_names):
            raise UsageError(f"compiled graph takes {len(self.arg_names)} argument(s), got {len(args)}",
                             "pass the graph's arguments in order")
        ctx = self.context()
        xs = [args[i] for i in self._positions]
        cache = ctx.graph_cache if ctx.graphs_enabled else None
        entry = None
        if cache is not None:     # torch.Size hashes and compares as the tuple in the runtime's signature_of
            entry = cache.get(tuple([(n, x.shape, x.dtype) for n, x in zip(self._signature_names, xs)]))
        if entry is not None:
            feed = {n: x.detach() if x.requires_grad else x for n, x in zip(self._signature_names, xs)}
            if threading.active_count() == 1:      # no other thread exists that could be capturing meanwhile
                out = cache.replay(entry, feed)
                flat = [out[o].clone() for o in self.outputs]
            else:
                with CUDA_GATE.shared():
                    out = cache.replay(entry, feed)
                    flat = [out[o].clone() for o in self.outputs]
        else:
            with torch.no_grad():
                out = ctx.run({n: x.detach() for n, x in zip(self._signature_names, xs)})
            flat = [out[o] for o in self.outputs]
        return tuple(flat) if self.as_tuple else flat[0]

    __call__ = forward          # no nn.Module hook dispatch per call (an EngineCall has no hooks)
