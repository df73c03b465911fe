"""Intra-op CPU threads per ExecutionContext — onnxruntime's `intra_op_num_threads`, as torch.set_num_threads(N).

Entry points: `check_threads(n)` (None or an int ≥ 1, else UsageError) and `cpu_threads(n)`, the scope a context's
call runs in: torch's intra-op thread count set to N on entry and the value before restored on exit (also when the
call raises). torch's setting is process-wide, so calls of contexts with different N cannot overlap: a call whose N
differs from the calls running now waits until they finish; calls with the same N run together; N = None takes no
part (it runs with whatever is set). A thread already inside a scope that opens another (nested) is not made to
wait for itself: the inner N applies until the inner scope ends. Imports torch and util only (the runtime sets a context's N; kernels/subnetwork.py runs small Loop bodies at 1).
"""

import threading
from contextlib import contextmanager

import torch

from .errors import UsageError

_COND = threading.Condition()
_STATE = {"n": None, "count": 0, "saved": None}       # the N of the calls running now, how many, the value before
_LOCAL = threading.local()                            # per thread: how deep inside cpu_threads scopes it is


def check_threads(n) -> int | None:
    """`n` as the intra-op thread count of a context: None (leave torch's setting alone) or an int ≥ 1."""
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise UsageError(f"threads={n!r} is not a thread count", "give an integer ≥ 1 (or None for torch's setting)")
    return n


@contextmanager
def cpu_threads(n: int | None):
    """Run the body with torch's intra-op thread count at `n` (None: unchanged); restored afterwards."""
    if n is None:
        yield
        return
    depth = getattr(_LOCAL, "depth", 0)
    if depth:                              # nested in this thread's own scope: no waiting on itself
        before = torch.get_num_threads()
        if before != n:
            torch.set_num_threads(n)
        _LOCAL.depth = depth + 1
        try:
            yield
        finally:
            _LOCAL.depth = depth
            if before != n:
                torch.set_num_threads(before)
        return
    with _COND:
        while _STATE["count"] and _STATE["n"] != n:
            _COND.wait()
        if not _STATE["count"]:
            _STATE["saved"] = torch.get_num_threads()
            if _STATE["saved"] != n:
                torch.set_num_threads(n)
            _STATE["n"] = n
        _STATE["count"] += 1
    _LOCAL.depth = 1
    try:
        yield
    finally:
        _LOCAL.depth = 0
        with _COND:
            _STATE["count"] -= 1
            if not _STATE["count"]:
                if torch.get_num_threads() != _STATE["saved"]:
                    torch.set_num_threads(_STATE["saved"])
                _STATE["n"] = None
                _COND.notify_all()
