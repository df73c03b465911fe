"""A process-wide gate between CUDA work that may synchronise and the moments that must not see a sync.

Two things a context does on first sight of a shape are process-global in CUDA/torch: the warm-up check runs with
torch's sync debug mode set to "error" (a global flag: any thread's `.cpu()` or `.item()` would raise meanwhile),
and a graph capture must not interleave with another thread's allocations on the same pool. So every CUDA run
holds the gate *shared* (many threads at once), and warm-up check + capture hold it *exclusive*. A thread already
holding it shared that needs exclusive (a run that meets a new shape) gives its shared holds back first and takes
them again afterwards, so two such threads never wait on each other. Cost: one lock round trip per run.
"""

import threading
from contextlib import contextmanager


class SharedExclusiveGate:
    def __init__(self):
        self._cond = threading.Condition()
        self._shared: dict[int, int] = {}      # thread id → shared hold count
        self._exclusive: int | None = None     # thread id holding it exclusive
        self._depth = 0                        # exclusive re-entries of that thread

    @contextmanager
    def shared(self):
        me = threading.get_ident()
        with self._cond:
            while self._exclusive not in (None, me):
                self._cond.wait()
            self._shared[me] = self._shared.get(me, 0) + 1
        try:
            yield
        finally:
            with self._cond:
                n = self._shared.pop(me) - 1
                if n:
                    self._shared[me] = n
                self._cond.notify_all()

    @contextmanager
    def exclusive(self):
        me = threading.get_ident()
        with self._cond:
            mine = self._shared.pop(me, 0)              # give our own shared holds back while we wait
            self._cond.notify_all()
            while (self._exclusive not in (None, me)) or self._shared:
                self._cond.wait()
            self._exclusive = me
            self._depth += 1
        try:
            yield
        finally:
            with self._cond:
                self._depth -= 1
                if self._depth == 0:
                    self._exclusive = None
                if mine:
                    self._shared[me] = self._shared.get(me, 0) + mine
                self._cond.notify_all()


CUDA_GATE = SharedExclusiveGate()
