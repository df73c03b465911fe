"""The timing loop of `tensorforge exec`: warm-up, then timed iterations, one Trace per iteration.

Entry points: `make_runner(context, feed, device, data_transfers, spin_wait)`, `benchmark(runner, ...)`.
One iteration = H2D copy of every input → engine compute → D2H copy of every output, each bracketed by a
pair of CUDA events on CUDA (inputs start in pinned host memory, outputs land in pinned host memory),
by `time.perf_counter` on CPU, where the device is the host and H2D/D2H take no time.
Memory traffic per iteration: Σ input bytes host→device + Σ output bytes device→host (none on CPU or
with --noDataTransfers), plus whatever the engine's layers read and write.
"""

import time
from dataclasses import dataclass

import torch

from ..util.errors import UsageError


@dataclass
class Trace:
    """One query, all times in ms since the runner's time base (trtexec's InferenceTrace)."""
    enq_start: float
    enq_end: float
    h2d_start: float
    h2d_end: float
    compute_start: float
    compute_end: float
    d2h_start: float
    d2h_end: float

    @property
    def enqueue(self) -> float:
        return self.enq_end - self.enq_start

    @property
    def h2d(self) -> float:
        return self.h2d_end - self.h2d_start

    @property
    def compute(self) -> float:
        return self.compute_end - self.compute_start

    @property
    def d2h(self) -> float:
        return self.d2h_end - self.d2h_start

    @property
    def latency(self) -> float:
        """trtexec's Latency: H2D + compute + D2H of one query."""
        return self.h2d + self.compute + self.d2h

    @property
    def end_to_end(self) -> float:
        """From the start of the query's H2D to the end of its D2H."""
        return self.d2h_end - self.h2d_start


class CpuRunner:
    """Runs the engine on the host; compute is timed with perf_counter, transfers are empty."""

    def __init__(self, context, feed: dict[str, torch.Tensor]):
        self.context, self.feed = context, feed
        self.base = time.perf_counter()
        self.outputs: dict[str, torch.Tensor] = {}

    def _now(self) -> float:
        return (time.perf_counter() - self.base) * 1e3

    def step(self) -> Trace:
        start = self._now()
        self.outputs = self.context.execute(self.feed)
        end = self._now()
        return Trace(start, end, start, start, start, end, end, end)

    def host_outputs(self) -> dict[str, torch.Tensor]:
        return self.outputs


class CudaRunner:
    """Runs the engine on a CUDA device in its current stream, timing each phase with an event pair.

    Host timestamps (enqueue) and device timestamps share one base: an event recorded and synchronised at
    construction, with the host clock read right after it completes.
    """

    def __init__(self, context, feed: dict[str, torch.Tensor], device: torch.device, data_transfers: bool = True,
                 spin_wait: bool = False):
        self.context, self.device = context, device
        self.transfers, self.spin = data_transfers, spin_wait
        self.stream = torch.cuda.current_stream(device)
        self.host_in = {k: v.cpu().pin_memory() for k, v in feed.items()}
        on_device = {k: v.to(device) for k, v in feed.items()}
        self.dev_in = context.bind_inputs(on_device) or on_device     # a CUDA graph's static inputs, if captured
        self.host_out: dict[str, torch.Tensor] = {}
        self.dev_out: dict[str, torch.Tensor] = {}
        self.events = [torch.cuda.Event(enable_timing=True) for _ in range(6)]
        self.base_event = torch.cuda.Event(enable_timing=True)
        self.base_event.record(self.stream)
        self.base_event.synchronize()
        self.base = time.perf_counter()

    def _host_ms(self) -> float:
        return (time.perf_counter() - self.base) * 1e3

    def _wait(self, event) -> None:
        if self.spin:
            while not event.query():
                pass
        else:
            event.synchronize()

    def step(self) -> Trace:
        ev = self.events
        enq_start = self._host_ms()
        ev[0].record(self.stream)
        if self.transfers:
            for k, t in self.host_in.items():
                self.dev_in[k].copy_(t, non_blocking=True)
        ev[1].record(self.stream)
        ev[2].record(self.stream)
        self.dev_out = self.context.run(self.dev_in, copy_outputs=False)      # graph replay where captured
        ev[3].record(self.stream)
        ev[4].record(self.stream)
        if self.transfers:
            for k, t in self.dev_out.items():
                dst = self.host_out.get(k)
                if dst is None or dst.shape != t.shape or dst.dtype != t.dtype:
                    dst = self.host_out[k] = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
                dst.copy_(t, non_blocking=True)
        ev[5].record(self.stream)
        enq_end = self._host_ms()
        self._wait(ev[5])
        t = [self.base_event.elapsed_time(e) for e in ev]
        return Trace(enq_start, enq_end, *t)

    def host_outputs(self) -> dict[str, torch.Tensor]:
        if self.transfers and self.host_out:
            return dict(self.host_out)
        return {k: v.cpu() for k, v in self.dev_out.items()}


def make_runner(context, feed: dict[str, torch.Tensor], device: torch.device, data_transfers: bool = True,
                spin_wait: bool = False):
    if device.type == "cuda":
        return CudaRunner(context, feed, device, data_transfers, spin_wait)
    if device.type == "cpu":
        return CpuRunner(context, {k: v.to(device) for k, v in feed.items()})
    raise UsageError(f"cannot benchmark on device {device}", "use --device=cpu or a CUDA GPU index")


@dataclass
class BenchResult:
    warmup: list[Trace]
    timed: list[Trace]
    warmup_ms: float            # host wall time spent warming up
    interrupted: bool = False   # stopped by Ctrl-C under --duration=-1

    @property
    def walltime_ms(self) -> float:
        """trtexec's Total Host Walltime: first timed query's H2D start → last query's D2H end."""
        if not self.timed:
            return 0.0
        return max(self.timed[-1].d2h_end, self.timed[-1].enq_end) - min(self.timed[0].h2d_start,
                                                                          self.timed[0].enq_start)


def benchmark(runner, warmup_ms: float = 200.0, duration_s: float = 3.0, iterations: int = 10,
              idle_ms: float = 0.0, clock=time.perf_counter) -> BenchResult:
    """Warm up for `warmup_ms`, then run until at least `iterations` queries AND `duration_s` seconds.

    `duration_s == -1` runs until Ctrl-C (KeyboardInterrupt), as trtexec does; the queries so far are kept.
    `idle_ms` sleeps between two queries (trtexec's --idleTime).
    """
    def idle():
        if idle_ms > 0:
            time.sleep(idle_ms / 1e3)

    t0 = clock()
    warm: list[Trace] = []
    while (clock() - t0) * 1e3 < warmup_ms:
        warm.append(runner.step())
        idle()
    warm_wall = (clock() - t0) * 1e3
    timed: list[Trace] = []
    t1 = clock()
    try:
        while len(timed) < iterations or duration_s < 0 or clock() - t1 < duration_s:
            timed.append(runner.step())
            idle()
    except KeyboardInterrupt:
        if duration_s >= 0 or not timed:
            raise
        return BenchResult(warm, timed, warm_wall, interrupted=True)
    return BenchResult(warm, timed, warm_wall)
