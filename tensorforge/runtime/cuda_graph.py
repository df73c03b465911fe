"""CUDA-graph capture and replay, one graph per input-shape signature, behind a small backend seam.

Entry points: `TorchGraphBackend(device)` (the real one), `GraphCache(backend)` used by ExecutionContext.
A captured graph replays every kernel of the engine with one launch, on the same memory: it reads its *static*
input buffers and writes its *static* outputs, so a call copies the caller's inputs in (skipped when the caller
passes the static buffers themselves), replays, and hands the outputs back. A backend is anything with
`warmup(fn)`, `capture(fn) -> (graph, result)`, `replay(graph)`; tests fake one on CPU (tests/runtime/fakes.py).

    signature = ((input name, shape, dtype), ...)       → CapturedGraph(graph, static inputs, static outputs)
"""

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .cuda_gate import CUDA_GATE


class CaptureFailed(Exception):
    """`fn` could not run under capture (a host sync, a data-dependent shape, an unsupported call)."""


class TorchGraphBackend:
    """torch.cuda.CUDAGraph on `device`. Capture happens on a side stream after warm-up runs on that stream
    (lazy cuBLAS/cuDNN handles, Triton compilation and autotuning must not happen during capture); each graph
    keeps its own memory pool, so one signature's static outputs are never overwritten by another's replay."""

    def __init__(self, device: torch.device, warmup_runs: int = 2):
        self.device = device
        self.warmup_runs = warmup_runs
        self._side: torch.cuda.Stream | None = None

    @property
    def side_stream(self) -> torch.cuda.Stream:
        if self._side is None:
            self._side = torch.cuda.Stream(self.device)
        return self._side

    def warmup(self, fn: Callable[[], Any]) -> None:
        """`warmup_runs` plain runs (compilation, autotuning, lazy handles may synchronise), then one run in which any
        host synchronisation is an error: whatever syncs cannot be captured, so the capture is not attempted (one
        that fails half-way costs the attempt, and _capture must put torch's CUDA RNG state back: rng_snapshot)."""
        side = self.side_stream
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(self.warmup_runs):
                fn()
            if threading.active_count() == 1:
                with CUDA_GATE.exclusive():         # the sync debug mode is process-global (runtime/cuda_gate.py)
                    no_sync(fn)
            # with other threads alive, the process-global sync debug mode would fail *their* host copies (seen on
            # the H200: "called a synchronizing CUDA operation" in a user thread): the capture itself, in
            # thread-local error mode, is then the test — a syncing engine fails to capture and runs uncaptured
        torch.cuda.current_stream(self.device).wait_stream(side)

    def capture(self, fn: Callable[[], Any]):
        with CUDA_GATE.exclusive():                 # no other thread's work interleaves with the capture
            return self._capture(fn)

    def _capture(self, fn: Callable[[], Any]):
        graph = torch.cuda.CUDAGraph()
        torch.cuda.synchronize(self.device)
        rng = rng_snapshot(self.device)
        with torch.cuda.stream(self.side_stream):
            graph.capture_begin(capture_error_mode="thread_local")
            try:
                result = fn()
            except Exception as e:
                try:
                    graph.capture_end()
                except Exception:  # noqa: BLE001 - the capture is already invalid; `e` is the cause to report
                    pass
                self._failed(rng)
                raise CaptureFailed(f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}") from e
            try:
                graph.capture_end()
            except Exception as e:  # noqa: BLE001 - e.g. the capture was invalidated without fn raising
                self._failed(rng)
                raise CaptureFailed(f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}") from e
        torch.cuda.current_stream(self.device).wait_stream(self.side_stream)
        return graph, result

    def _failed(self, rng) -> None:
        rng_restore(rng)
        torch.cuda.synchronize(self.device)

    def replay(self, graph) -> None:
        graph.replay()


def rng_snapshot(device: torch.device):
    """(the device's default CUDA generator, a copy of its state) taken before a capture. capture_begin puts that
    generator's state in capture mode and only a *successful* capture_end takes it out; after a failed capture
    every later random op on the device raised "Offset increment outside graph capture encountered unexpectedly"
    for the rest of the process (seen on the H100: one uncapturable engine, then every timed build's random
    inputs failed)."""
    gen = torch.cuda.default_generators[device.index if device.index is not None else torch.cuda.current_device()]
    return gen, gen.clone_state()


def rng_restore(snapshot) -> None:
    """Put the copy taken by rng_snapshot back (a state object that is not capturing; same seed and offset)."""
    gen, state = snapshot
    gen.graphsafe_set_state(state)


def no_sync(fn: Callable[[], Any]):
    """Run `fn` with torch's sync debug mode set to "error"; a synchronising call raises CaptureFailed."""
    old = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        return fn()
    except RuntimeError as e:
        raise CaptureFailed(f"it synchronises with the host: {(str(e).splitlines() or [''])[0]}") from e
    finally:
        torch.cuda.set_sync_debug_mode(old)


@dataclass
class CapturedGraph:
    signature: tuple
    graph: Any
    static_inputs: dict[str, torch.Tensor]
    static_outputs: dict[str, torch.Tensor]
    host_values: dict[str, torch.Tensor] = field(default_factory=dict)   # shape arithmetic copied to the device once
    replays: int = 0


def signature_of(feed: dict[str, torch.Tensor], names: list[str]) -> tuple:
    return tuple((n, tuple(feed[n].shape), feed[n].dtype) for n in names)


class GraphCache:
    """Captured graphs by signature, least recently used evicted past `max_graphs` (each holds its activations)."""

    def __init__(self, backend, max_graphs: int = 8):
        self.backend = backend
        self.max_graphs = max_graphs
        self.graphs: OrderedDict[tuple, CapturedGraph] = OrderedDict()
        self.captures = 0
        self.evictions = 0

    def get(self, signature: tuple) -> CapturedGraph | None:
        entry = self.graphs.get(signature)
        if entry is not None:
            self.graphs.move_to_end(signature)
        return entry

    def capture(self, signature: tuple, feed: dict[str, torch.Tensor], device: torch.device,
                run: Callable[[dict, dict], dict]) -> CapturedGraph:
        """Allocate static inputs for `signature`, fill them from `feed`, warm up, capture `run(static, host)`."""
        static = {n: torch.empty(shape, dtype=dtype, device=device) for n, shape, dtype in signature}
        for n, t in static.items():
            t.copy_(feed[n])
        host: dict[str, torch.Tensor] = {}
        self.backend.warmup(lambda: run(static, host))
        graph, outputs = self.backend.capture(lambda: run(static, host))
        entry = CapturedGraph(signature, graph, static, outputs, host)
        self.graphs[signature] = entry
        self.captures += 1
        while len(self.graphs) > self.max_graphs:
            self.graphs.popitem(last=False)
            self.evictions += 1
        return entry

    def replay(self, entry: CapturedGraph, feed: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        for n, buf in entry.static_inputs.items():
            src = feed[n]
            if src.data_ptr() != buf.data_ptr() or src.stride() != buf.stride():
                buf.copy_(src, non_blocking=True)
        self.backend.replay(entry.graph)
        entry.replays += 1
        return entry.static_outputs

    def invalidate(self) -> int:
        """Drop every graph (their memory returns to the allocator); the next call per signature captures again."""
        n = len(self.graphs)
        self.graphs.clear()
        return n

    def __len__(self) -> int:
        return len(self.graphs)
