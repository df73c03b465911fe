"""EngineModel: one loaded engine as a served model — metadata, per-request checks, batched execution.

Shared by the Ray Serve replica (deployment.py) and the Triton Python-backend model (triton_model.py); imports no
Ray. A batch is a list of requests (name → torch tensor); requests are grouped by their non-batch shapes, each
group concatenated along dim 0 (at most `max_batch_size` rows, the engine's profile maximum), run once, and the
outputs split back by row offsets. With CUDA graphs the rows are padded up to the next bucket (1, 2, 4, …, max) so
a handful of captured graphs cover every batch; padding rows are zeros and are dropped (rows are independent:
that is what batching along dim 0 assumes, and warm-up checks that outputs keep the batch dimension).
Memory traffic per batch: one concatenation copy of the inputs, one slice per output per request.
"""

import queue
import threading
import time
from dataclasses import dataclass

import torch

from ..runtime import ExecutionContext, load_engine_file
from ..util.device import resolve_device
from ..util.errors import InputError, TensorforgeError
from .datatypes import v2_name


class RequestError(TensorforgeError):
    """A request the model cannot run (HTTP 400 / gRPC INVALID_ARGUMENT): the message names the problem."""


class EngineLoadError(TensorforgeError):
    """The replica could not load or warm up its engine; the deployment must not go healthy."""


@dataclass(frozen=True)
class TensorSpec:
    name: str
    datatype: str               # v2 datatype
    shape: tuple[int, ...]      # -1 where the engine's profiles let the dimension vary

    def as_dict(self) -> dict:
        return {"name": self.name, "datatype": self.datatype, "shape": list(self.shape)}


def _fmt(shape) -> str:
    return "x".join(str(d) for d in shape)


def _buckets(lo: int, hi: int) -> list[int]:
    out, b = [], 1
    while b < hi:
        if b >= lo:
            out.append(b)
        b *= 2
    return out + [hi]


class EngineModel:
    """`path`: engine file; `device`: None = CUDA when visible, else CPU; `max_batch_size`: cap below the profile's
    maximum (None: the profile's). `contexts`: execution contexts (each on its own CUDA stream); default 2 on CUDA,
    1 on the CPU (torch already spreads one CPU run over the cores)."""

    def __init__(self, path, name: str | None = None, device=None, max_batch_size: int | None = None,
                 contexts: int | None = None, version: str = "1"):
        self.path = str(path)
        try:
            self.engine = load_engine_file(path)
            self.device = resolve_device(device)
        except TensorforgeError as e:
            raise EngineLoadError(f"cannot load engine {self.path}: {e}") from e
        self.name = name or self.engine.name
        self.version = version
        eng = self.engine
        prof = eng.profiles[0] if eng.profiles else {}
        self.inputs = [TensorSpec(t.name, v2_name(t.dtype), self._dims(t.name, t.shape, prof)) for t in eng.inputs]
        self.outputs = [TensorSpec(t.name, v2_name(t.dtype), tuple(-1 if not isinstance(d, int) or d < 0 else d
                                                                     for d in (t.shape or (-1,))))
                        for t in eng.outputs]
        self._dtypes = {t.name: t.dtype for t in eng.inputs}
        self.profile_max_batch, self.min_batch = self._batch_range(prof)
        if max_batch_size and self.profile_max_batch and not 1 <= max_batch_size <= self.profile_max_batch:
            raise EngineLoadError(f"--max-batch-size {max_batch_size} is outside the engine's batch range "
                                  f"{self.min_batch}..{self.profile_max_batch}",
                                  "give a size inside the profile, or rebuild with a larger --maxShapes batch")
        # 0: no batching (each request runs as sent); None: the profile's maximum
        self.max_batch_size = 0 if max_batch_size == 0 else min(max_batch_size or self.profile_max_batch,
                                                                self.profile_max_batch)
        n = contexts or (2 if self.device.type == "cuda" else 1)
        first = ExecutionContext(eng, self.device, stream=self._stream())
        self._pool: queue.Queue = queue.Queue()
        self._pool.put(first)
        for _ in range(n - 1):
            self._pool.put(ExecutionContext(eng, self.device, stream=self._stream(), shared_weights=first.device_weights))
        self.n_contexts = n
        self.graphs = first.graphs_enabled
        self.buckets = _buckets(self.min_batch, self.max_batch_size) if self.max_batch_size else []
        self._stats_lock = threading.Lock()
        self.batch_stats: dict[int, list] = {}   # rows → [count, total ns]

    def _stream(self):
        return torch.cuda.Stream(self.device) if self.device.type == "cuda" else None

    @staticmethod
    def _dims(name, shape, prof) -> tuple[int, ...]:
        if name in prof:
            mn, _, mx = prof[name]
            return tuple(a if a == b else -1 for a, b in zip(mn, mx))
        return tuple(shape or ())

    def _batch_range(self, prof) -> tuple[int, int]:
        """(max rows, min rows) along dim 0 when every input varies there alike; (0, 0): not batchable."""
        ranges = {(prof[n][0][0], prof[n][2][0]) for n in self.engine.input_names if n in prof and prof[n][0]}
        if len(ranges) != 1 or len(self.engine.input_names) != sum(1 for n in self.engine.input_names if n in prof):
            return 0, 0
        lo, hi = ranges.pop()
        return (hi, lo) if hi > lo else (0, 0)

    # ---- metadata ---------------------------------------------------------------------------
    def metadata(self) -> dict:
        return {"name": self.name, "versions": [self.version], "platform": "tensorforge",
                "inputs": [t.as_dict() for t in self.inputs], "outputs": [t.as_dict() for t in self.outputs]}

    # ---- per-request checks -----------------------------------------------------------------
    def check(self, shapes: dict[str, tuple[str, tuple[int, ...]]]) -> int:
        """`shapes`: input name → (v2 datatype, shape). Returns the request's rows; raises RequestError naming
        the first problem (missing/unknown input, datatype, rank, a dimension outside the profile, batch too big)."""
        names = [t.name for t in self.inputs]
        for n in names:
            if n not in shapes:
                raise RequestError(f"missing input {n!r}", f"model {self.name!r} takes: {', '.join(names)}")
        for n in shapes:
            if n not in names:
                raise RequestError(f"unknown input {n!r}", f"model {self.name!r} takes: {', '.join(names)}")
        rows = None
        for spec in self.inputs:
            datatype, shape = shapes[spec.name]
            if datatype != spec.datatype:
                raise RequestError(f"input {spec.name!r} has datatype {datatype}, model {self.name!r} expects "
                                   f"{spec.datatype}", "send the datatype the model metadata lists")
            if len(shape) != len(spec.shape):
                raise RequestError(f"input {spec.name!r} has shape [{_fmt(shape)}] of rank {len(shape)}, model "
                                   f"{self.name!r} expects rank {len(spec.shape)} ([{_fmt(spec.shape)}])",
                                   "send the shape the model metadata lists")
            if self.max_batch_size:
                if rows is None:
                    rows = shape[0]
                elif shape[0] != rows:
                    raise RequestError(f"input {spec.name!r} has {shape[0]} rows, another input has {rows}",
                                       "give every input the same batch size (dimension 0)")
        if self.max_batch_size and not self.min_batch <= rows <= self.max_batch_size:
            raise RequestError(f"batch of {rows} rows is outside model {self.name!r}'s batch range "
                               f"{self.min_batch}..{self.max_batch_size}", "split the request into smaller batches")
        self._check_profile({n: tuple(s) for n, (_, s) in shapes.items()})
        return rows or 1

    def _check_profile(self, shapes) -> None:
        """Non-batch dimensions inside some profile (the batch dimension is checked against max_batch_size)."""
        first = None
        skip = 1 if self.max_batch_size else 0
        for index, prof in enumerate(self.engine.profiles or [{}]):
            bad = None
            for name, (mn, _, mx) in prof.items():
                s = shapes[name]
                for axis in range(skip, len(s)):
                    if not mn[axis] <= s[axis] <= mx[axis]:
                        bad = (f"input {name!r} shape [{_fmt(s)}] is outside model {self.name!r}'s profile "
                               f"{index} (min [{_fmt(mn)}], max [{_fmt(mx)}])")
                        break
                if bad:
                    break
            if bad is None:
                return
            first = first or bad
        raise RequestError(first, "send a shape inside the profile the model metadata lists")

    # ---- execution --------------------------------------------------------------------------
    def run_batch(self, feeds: list[dict[str, torch.Tensor]]) -> list[dict[str, torch.Tensor]]:
        """Checked requests (name → torch tensor) → their outputs (torch tensors on the engine's device)."""
        if not self.max_batch_size:
            return [self._run(f, 1) for f in feeds]
        groups: dict[tuple, list[int]] = {}
        for i, f in enumerate(feeds):
            groups.setdefault(tuple((n, tuple(f[n].shape[1:])) for n in sorted(f)), []).append(i)
        out: list = [None] * len(feeds)
        for members in groups.values():
            rows = [feeds[i][self.inputs[0].name].shape[0] for i in members]
            total = sum(rows)
            if total > self.max_batch_size:          # only when called without the Ray batcher's row budget
                half = len(members) // 2 or 1
                for part in (members[:half], members[half:]):
                    for i, r in zip(part, self.run_batch([feeds[i] for i in part])):
                        out[i] = r
                continue
            padded = next(b for b in self.buckets if b >= total) if self.graphs else total
            feed = {}
            for spec in self.inputs:
                parts = [feeds[i][spec.name].to(self.device) for i in members]
                if padded > total:
                    shape = (padded - total, *parts[0].shape[1:])
                    parts.append(torch.zeros(shape, dtype=parts[0].dtype, device=self.device))
                feed[spec.name] = parts[0] if len(parts) == 1 else torch.cat(parts)
            result = self._run(feed, padded)
            start = 0
            for i, r in zip(members, rows):
                out[i] = {k: v.narrow(0, start, r) for k, v in result.items()}
                start += r
        return out

    def _run(self, feed, rows) -> dict[str, torch.Tensor]:
        ctx = self._pool.get()
        try:
            t0 = time.perf_counter_ns()
            result = ctx.run(feed)
            ctx.synchronize()
            dt = time.perf_counter_ns() - t0
        except TensorforgeError as e:
            raise RequestError(str(e)) from e
        finally:
            self._pool.put(ctx)
        if self.max_batch_size:
            bad = [k for k, v in result.items() if v.dim() == 0 or v.shape[0] != rows]
            if bad:
                raise InputError(f"output {bad[0]!r} of model {self.name!r} does not keep the batch dimension "
                                 f"({rows} rows in, shape {list(result[bad[0]].shape)} out)",
                                 "serve it with --max-batch-size 0 (no batching)")
        with self._stats_lock:
            s = self.batch_stats.setdefault(rows, [0, 0])
            s[0] += 1
            s[1] += dt
        self.last_engine_ns = dt
        return result

    def warmup(self) -> int:
        """One run per profile shape the server will meet: every bucket with CUDA graphs (each captured now),
        else the opt shape (and, when batching, the largest batch); returns how many runs."""
        runs = 0
        for prof in self.engine.profiles or [{}]:
            sizes = self.buckets if self.graphs else sorted({prof[self.inputs[0].name][1][0], self.max_batch_size}
                                                            if self.max_batch_size else {0})
            for b in sizes:
                feed = {}
                for spec in self.inputs:
                    shape = list(prof[spec.name][1]) if spec.name in prof else list(spec.shape)
                    if self.max_batch_size:
                        shape[0] = b
                    feed[spec.name] = torch.zeros(shape, dtype=self._dtypes[spec.name], device=self.device)
                try:
                    self._run(feed, shape[0] if self.max_batch_size else 1)
                except TensorforgeError as e:
                    raise EngineLoadError(f"engine {self.path} failed its warm-up run: {e}") from e
                runs += 1
        with self._stats_lock:
            self.batch_stats.clear()
        return runs
