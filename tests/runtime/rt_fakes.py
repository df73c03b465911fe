"""A CPU stand-in for the CUDA-graph backend, faithful to what a captured graph does.

Capture runs the function once and keeps it with the outputs it produced (the graph's static outputs). Replay runs
the same function again and writes its results *into* those static outputs — like a replayed graph, which
re-executes the same kernels on the same memory: it reads whatever the static inputs hold now, and the caller
sees the same output tensors every time. `capturing` is true while a capture runs, so a test kernel can refuse
(as a host sync does under real capture).
"""

from tensorforge.runtime.cuda_graph import CaptureFailed


class FakeGraph:
    def __init__(self, fn, outputs):
        self.fn, self.outputs = fn, outputs


class FakeGraphBackend:
    def __init__(self):
        self.capturing = False
        self.warmups = 0
        self.captures = 0
        self.replays = 0

    def warmup(self, fn):
        self.warmups += 1
        fn()

    def capture(self, fn):
        self.capturing = True
        try:
            outputs = fn()
        except Exception as e:  # noqa: BLE001 - the real backend reports any failure under capture this way
            raise CaptureFailed(f"{type(e).__name__}: {e}") from e
        finally:
            self.capturing = False
        self.captures += 1
        return FakeGraph(fn, outputs), outputs

    def replay(self, graph):
        fresh = graph.fn()
        for name, static in graph.outputs.items():
            static.copy_(fresh[name])
        self.replays += 1
