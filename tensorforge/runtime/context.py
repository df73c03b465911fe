"""ExecutionContext: runs an Engine's layers on one device, eagerly or by CUDA-graph replay.

Per context (once): weights copied to the device (and to the host for host-placed shape arithmetic; several
contexts may share one device copy), one kernel instantiated per layer from its tactic id, and the last use of
every tensor computed so activations are released as soon as nothing reads them (peak memory ≈ the widest live
set, not the sum — the liveness the builder's memory plan assumes).

Per call: inputs checked against the engine (names, dtypes, rank, profile bounds), then either every layer's kernel
runs in order (host layers see CPU tensors; a host value read by a device layer is copied to the device), or — on
CUDA, by default — the call's input-shape signature selects a captured graph (captured on first sight), the inputs
are copied into its static buffers and the graph is replayed: one launch for the whole engine.
An engine that cannot be captured (a host sync, a data-dependent shape) runs uncaptured with the reason logged,
unless graphs were asked for explicitly (use_cuda_graph=True, --useCudaGraph): then the reason is an error.
"""

import threading
from contextlib import contextmanager

import torch

from ..engine import Engine
from ..kernels import instantiate
from ..util.device import resolve_device
from ..util.errors import BuildError, ExecutionError, InputError, ShapeError, TensorforgeError, UsageError
from ..util.log import get_logger
from .kernel_regen import regenerate_kernels
from .plugins_check import check_plugins
from .cuda_gate import CUDA_GATE
from ..util.cpu_threads import check_threads, cpu_threads
from .cuda_graph import CaptureFailed, GraphCache, TorchGraphBackend, signature_of
from .point_select import nearest_point, point_programs

REFERENCE_TACTIC = "any.torch_ref"           # kernels/reference.py: every op's reference, on any device
_DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
                torch.int64: "int64", torch.int32: "int32", torch.bool: "bool"}


def _fmt(shape) -> str:
    return "x".join(str(d) for d in shape)


@contextmanager
def tf32_mode(enabled: bool):
    """TF32 for fp32 matmul/convolution: on unless the engine was built with --noTF32; restored afterwards."""
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


class ExecutionContext:
    """`use_cuda_graph`: None = on where the device supports it, True = required, False = off.
    `stream`: a torch.cuda.Stream this context enqueues on (None: the current stream). `graph_backend`: the capture
    seam (tests pass a fake). `shared_weights`: the device weights of another context of the same engine.
    `threads`: torch's intra-op CPU thread count during this context's calls (onnxruntime's intra_op_num_threads;
    util/cpu_threads.py), the caller's restored after each; None leaves torch's setting alone."""

    def __init__(self, engine: Engine, device=None, use_cuda_graph: bool | None = None, stream=None,
                 graph_backend=None, shared_weights: dict | None = None, max_graphs: int = 8,
                 threads: int | None = None):
        self.threads = check_threads(threads)
        self.engine = check_plugins(engine)
        self.device = resolve_device(device)
        self.host = torch.device("cpu")
        self.stream = stream
        # inputs a device layer reads as values (shapes, axes …) stay on the host: no copy, no sync to read them
        self._value_inputs = {k: set(v) for k, v in engine.build_info.get("memory", {}).get("host_value_inputs", {}).items()}
        needs_host = {i for layer in engine.layers for k, i in enumerate(layer.inputs)
                      if i and (layer.placement == "host" or k in self._value_inputs.get(layer.name, ()))}
        needs_dev = {i for layer in engine.layers if layer.placement != "host" for k, i in enumerate(layer.inputs)
                     if i and k not in self._value_inputs.get(layer.name, ())}
        needs_dev |= set(engine.output_names)
        if shared_weights is not None:
            self._dev_consts = shared_weights
        else:
            self._dev_consts = {k: v.to(self.device) for k, v in engine.constants.items() if k in needs_dev}
        self._host_consts = {k: v for k, v in engine.constants.items() if k in needs_host}
        regenerate_kernels(engine)          # generated kernels: source made again from each layer's data, never read
        self.kernels = []
        self.substituted: dict[str, str] = {}       # layer → why its tactic could not run here
        for layer in engine.layers:
            where = self.host if layer.placement == "host" else self.device
            try:
                self.kernels.append(instantiate(layer.tactic, layer, where))
            except ValueError as e:
                # built for another device (a Triton or cuDNN-layout tactic loaded on the CPU): the same engine file
                # runs anywhere, through the op's reference, and says so
                self.substituted[layer.name] = str(e)
                self.kernels.append(instantiate(REFERENCE_TACTIC, layer, where))
            except KeyError as e:
                raise BuildError(f"cannot prepare layer {layer.name!r}: {e}", "rebuild the engine with this tensorforge") from e
        self._alternatives = self._point_kernels()
        if self.substituted:
            first = next(iter(self.substituted.values()))
            get_logger().warning(f"engine {engine.name!r}: {len(self.substituted)} layer(s) use tactics that cannot run "
                                 f"on {self.device.type} and run their torch reference instead (first: {first}); "
                                 f"rebuild on this device for its own tactics")
        self._compile_program()
        self.active_profile = 0
        self._input_shapes: dict[str, tuple[int, ...]] = {}
        self.tf32 = "noTF32" not in engine.build_info.get("flags", [])
        self._current = -1                      # index of the layer running now (names the culprit of a failure)
        self._busy = threading.RLock()          # held by the one thread running this context (docs/runtime.md)
        self._setup_graphs(use_cuda_graph, graph_backend, max_graphs)

    def _point_kernels(self) -> dict[str, dict[int, object]]:
        """The kernels of layers whose tactic differs at the first profile's min or max point (builder/
        point_tactics.py), by point and layer index. One that cannot run on this device is left out: the opt
        point's kernel (or its substitute) runs that point too."""
        alt: dict[str, dict[int, object]] = {}
        for index, layer in enumerate(self.engine.layers):
            if not layer.point_tactics or layer.name in self.substituted:
                continue
            where = self.host if layer.placement == "host" else self.device
            for label, tid in layer.point_tactics.items():
                try:
                    alt.setdefault(label, {})[index] = instantiate(tid, layer, where)
                except ValueError as e:
                    get_logger().verbose(f"layer {layer.name}: {label}-point tactic {tid} cannot run here ({e}); "
                                         f"the opt point's {layer.tactic} runs there too")
                except KeyError as e:
                    raise BuildError(f"cannot prepare layer {layer.name!r} ({label} point): {e}",
                                     "rebuild the engine with this tensorforge") from e
        return alt

    def point_for(self, shapes: dict[str, tuple[int, ...]]) -> str:
        """Which point's kernels run inputs of these shapes ('opt' when the engine has one kernel per layer)."""
        if len(self._programs) == 1:
            return "opt"
        key = tuple(tuple(shapes[n]) for n in self.engine.input_names)
        label = self._point_of.get(key)
        if label is None:
            first = self.engine.profiles[0]
            inside = all(all(a <= d <= b for d, a, b in zip(shapes[n], mn, mx)) for n, (mn, _, mx) in first.items())
            label = self._point_of[key] = nearest_point(first, shapes) if inside else "opt"   # another profile
        return label if label in self._programs else "opt"

    @contextmanager
    def _one_thread(self):
        """A context is used by one thread at a time (TensorRT's rule): a second thread entering while it runs gets
        UsageError instead of racing on the context's per-call state (its slots, profile, graphs, kernel caches)."""
        if not self._busy.acquire(blocking=False):
            raise UsageError(f"this ExecutionContext of engine {self.engine.name!r} is running in another thread; a "
                             "context is used by one thread at a time",
                             "create one context per thread (they can share the engine and its device weights), "
                             "or call tfg.Engine.run, which keeps one per thread")
        try:
            yield
        finally:
            self._busy.release()

    def _gate(self):
        """CUDA runs hold the process-wide gate shared; warm-up checks and captures take it exclusive."""
        return CUDA_GATE.shared() if self.device.type == "cuda" else _nothing()

    @property
    def device_weights(self) -> dict:
        return self._dev_consts

    # ---- CUDA graphs ----------------------------------------------------------------------------
    def _setup_graphs(self, use_cuda_graph, backend, max_graphs) -> None:
        self.graphs_required = use_cuda_graph is True
        self.graph_disabled_reason: str | None = None
        self.graph_blockers: list[dict] = []    # read-only record: the layer(s) whose capture failed (name, op, tactic)
        if backend is None and self.device.type == "cuda" and use_cuda_graph is not False:
            backend = TorchGraphBackend(self.device)
        if use_cuda_graph is False:
            self.graph_disabled_reason = "CUDA graphs turned off (--noCudaGraph)"
        elif backend is None:
            if use_cuda_graph:
                raise UsageError(f"CUDA graphs need a CUDA device; this context runs on {self.device}",
                                 "drop --useCudaGraph, or run on a GPU (--device=cuda)")
            self.graph_disabled_reason = f"no CUDA graphs on {self.device.type}"
        self.graph_cache = GraphCache(backend, max_graphs) if backend is not None else None

    @property
    def graphs_enabled(self) -> bool:
        return self.graph_cache is not None and self.graph_disabled_reason is None

    def invalidate_graphs(self) -> int:
        """Forget every captured graph (e.g. after weights changed); returns how many were dropped."""
        return self.graph_cache.invalidate() if self.graph_cache is not None else 0

    def _capture_failed(self, e: CaptureFailed) -> None:
        layer = self.engine.layers[self._current] if 0 <= self._current < len(self.engine.layers) else None
        where = (f"layer {layer.name!r} ({layer.op}, tactic {layer.tactic}) cannot be captured" if layer is not None
                 else "the engine cannot be captured")
        reason = f"{where}: {e}"
        if layer is not None:
            self.graph_blockers.append({"layer": layer.name, "op": layer.op, "tactic": layer.tactic})
        if self.graphs_required:
            raise UsageError(f"engine {self.engine.name!r} cannot run in a CUDA graph: {reason}",
                             "run without --useCudaGraph (it needs host synchronisation or data-dependent shapes)")
        self.graph_disabled_reason = reason
        get_logger().warning(f"engine {self.engine.name!r} runs without CUDA graphs: {reason} "
                             "(pass --noCudaGraph to skip the attempt)")

    # ---- input checks ---------------------------------------------------------------------------
    def check_inputs(self, feed: dict[str, torch.Tensor]) -> None:
        names = self.engine.input_names
        missing = [n for n in names if n not in feed]
        if missing:
            raise InputError(f"missing input {missing[0]!r}", f"the engine's inputs are: {', '.join(names)}")
        extra = [n for n in feed if n not in names]
        if extra:
            raise InputError(f"unknown input {extra[0]!r}", f"the engine's inputs are: {', '.join(names)}")
        for info in self.engine.inputs:
            t = feed[info.name]
            if t.dtype != info.dtype:
                raise InputError(f"input {info.name!r} has dtype {_DTYPE_NAMES.get(t.dtype, t.dtype)}, the engine expects "
                                 f"{_DTYPE_NAMES.get(info.dtype, info.dtype)}", "convert the input to the expected dtype")
        self.active_profile = self._select_profile({n: tuple(feed[n].shape) for n in names})

    def _select_profile(self, shapes: dict[str, tuple[int, ...]]) -> int:
        reasons = []
        for index, profile in enumerate(self.engine.profiles):
            bad = None
            for name, (mn, _, mx) in profile.items():
                s = shapes[name]
                if len(s) != len(mn):
                    bad = f"input {name!r} has rank {len(s)}, the engine expects rank {len(mn)} ({_fmt(mn)})"
                elif any(not (a <= d <= b) for d, a, b in zip(s, mn, mx)):
                    bad = (f"input {name!r} shape {_fmt(s)} is outside profile {index} "
                           f"(min {_fmt(mn)}, max {_fmt(mx)})")
                if bad:
                    break
            if bad is None:
                return index
            reasons.append(bad)
        raise ShapeError(reasons[0], "rebuild with wider --minShapes/--maxShapes, or give a shape inside the profile")

    # ---- execution ------------------------------------------------------------------------------
    def run(self, feed: dict[str, torch.Tensor], copy_outputs: bool = True) -> dict[str, torch.Tensor]:
        """Run the engine; `feed` maps input names to torch tensors (any device). Returns name → tensor on the device.

        With a CUDA graph the outputs live in the graph's static buffers, overwritten by the next call of the same
        shapes: `copy_outputs=False` returns those buffers themselves (no copy; TensorRT's output-binding contract).
        """
        with self._one_thread(), self._gate(), cpu_threads(self.threads):
            return self._run(feed, copy_outputs)

    def _run(self, feed, copy_outputs):
        self.check_inputs(feed)
        self._current = -1
        try:
            with self._stream_scope(), tf32_mode(self.tf32) if self.device.type == "cuda" else _nothing():
                if self.graphs_enabled:
                    out = self._run_graph(feed)
                    if out is not None:
                        return {k: v.clone() for k, v in out.items()} if copy_outputs else dict(out)
                return self.execute({k: v.to(self.device) for k, v in feed.items()})
        except TensorforgeError:
            raise
        except Exception as e:  # noqa: BLE001 - a kernel's own error (torch, Triton …) becomes one line naming the layer
            raise self.layer_failure(e) from e

    def bind_inputs(self, feed: dict[str, torch.Tensor]) -> dict[str, torch.Tensor] | None:
        """The static input buffers of the graph for `feed`'s shapes (captured now if new), holding `feed`'s values.

        Write the next inputs into them in place and pass them back to `run`: no copy is made. None when this
        context runs uncaptured (then pass device tensors to `run` directly)."""
        with self._one_thread(), self._gate(), cpu_threads(self.threads):
            return self._bind_inputs(feed)

    def _bind_inputs(self, feed):
        self.check_inputs(feed)
        if not self.graphs_enabled:
            return None
        self._current = -1
        try:
            with self._stream_scope(), tf32_mode(self.tf32) if self.device.type == "cuda" else _nothing():
                if self._run_graph(feed) is None:
                    return None
        except TensorforgeError:
            raise
        except Exception as e:  # noqa: BLE001 - as in run()
            raise self.layer_failure(e) from e
        return dict(self.graph_cache.get(signature_of(feed, self.engine.input_names)).static_inputs)

    def layer_failure(self, e: Exception) -> ExecutionError:
        """The error a run raises when a kernel raised `e`: one line naming the layer that was running (its op,
        tactic and the ONNX nodes it came from) and the kernel's own first line; the cause is kept for --verbose."""
        first = ((str(e).splitlines() or [""])[0]).strip()[:300]
        cause = f"{type(e).__name__}: {first}" if first else type(e).__name__
        if 0 <= self._current < len(self.engine.layers):
            layer = self.engine.layers[self._current]
            nodes = ", ".join(layer.origin) if layer.origin else "none recorded"
            return ExecutionError(f"layer {layer.name!r} ({layer.op}, tactic {layer.tactic}; ONNX node(s): {nodes}) "
                                  f"failed at run time: {cause}",
                                  "check the input values and the attributes of those ONNX nodes; "
                                  "--verbose shows the traceback")
        return ExecutionError(f"engine {self.engine.name!r} failed at run time outside its layers: {cause}",
                              "--verbose shows the traceback")

    def _run_graph(self, feed: dict[str, torch.Tensor]) -> dict[str, torch.Tensor] | None:
        names = self.engine.input_names
        sig = signature_of(feed, names)
        entry = self.graph_cache.get(sig)
        if entry is None:
            try:
                entry = self.graph_cache.capture(sig, feed, self.device, lambda f, h: self._execute(f, h))
            except CaptureFailed as e:
                self._capture_failed(e)
                return None
        return self.graph_cache.replay(entry, feed)

    def _compile_program(self) -> None:
        """Turn the layer list into a flat program over numbered slots, so a call does no name lookups.

        Every tensor gets a device slot and, where host layers produce or read it on the CPU, a host slot. A device
        layer reads a host value in place where the op reads it as a value (shape, axes …: `host_value_inputs` of
        the engine's memory plan), else copies it to the device first (once per call, at its first reader); every slot
        is cleared after its last reader (network outputs are kept), which is the liveness the memory plan assumes.
        Slot 0 is the sink for absent outputs, slot 1 is always None (absent optional inputs).
        """
        eng = self.engine
        dev: dict[str, int] = {}
        host: dict[str, int] = {}
        template: list = [None, None]

        def slot(table, name, value=None):
            if name not in table:
                table[name] = len(template)
                template.append(value)
            return table[name]
        for k, v in self._dev_consts.items():
            slot(dev, k, v)
        for k, v in self._host_consts.items():
            slot(host, k, v)
        for name in eng.input_names:
            slot(dev, name)
        last_use: dict[str, int] = {}
        for index, layer in enumerate(eng.layers):
            for i in layer.inputs:
                if i:
                    last_use[i] = index
        free_after: list[list[str]] = [[] for _ in eng.layers]
        keep = set(eng.output_names)
        for name, index in last_use.items():
            if name not in keep and name not in eng.constants:
                free_after[index].append(name)
        program, on_device = [], set(dev)
        for index, (layer, kernel) in enumerate(zip(eng.layers, self.kernels)):
            copies, ins = [], []
            values = self._value_inputs.get(layer.name, ())
            for k, i in enumerate(layer.inputs):
                if not i:
                    ins.append(1)
                elif layer.placement == "host" or (k in values and i in host):
                    ins.append(host[i] if i in host else slot(dev, i))
                else:
                    if i not in on_device:          # a host value: copy it over at its first device reader
                        copies.append((host[i], slot(dev, i), i))
                        on_device.add(i)
                    ins.append(dev[i])
            table = host if layer.placement == "host" else dev
            outs = [slot(table, o) if o else 0 for o in layer.outputs]
            if layer.placement != "host":
                on_device.update(o for o in layer.outputs if o)
            frees = [t[n] for n in free_after[index] for t in (dev, host) if n in t]
            program.append((index, kernel, tuple(copies), tuple(ins), tuple(outs), tuple(frees)))
        self._program = program
        self._programs = point_programs(program, self._alternatives)
        self._point_of: dict[tuple, str] = {}
        self._template = template
        self._feed_slots = [(n, dev[n]) for n in eng.input_names]
        self._output_slots = [(n, dev[n] if n in on_device else None, host.get(n)) for n in eng.output_names]

    def execute(self, feed: dict[str, torch.Tensor], host_values: dict | None = None, hook=None) -> dict[str, torch.Tensor]:
        """Run without input checks: `feed` already validated and on the device.

        `host_values` memoises host → device copies of shape arithmetic (during capture no copy may be issued);
        `hook(index, phase)` is called with phase "start"/"end" around every layer (the profiler's seam).
        A kernel that raises becomes one ExecutionError naming the layer (layer_failure).
        """
        try:
            with self._one_thread(), self._gate(), cpu_threads(self.threads):
                return self._execute(feed, host_values, hook)
        except TensorforgeError:
            raise
        except Exception as e:  # noqa: BLE001 - as in run()
            raise self.layer_failure(e) from e

    def _execute(self, feed, host_values=None, hook=None) -> dict[str, torch.Tensor]:
        """execute() with a kernel's errors raised as they are: graph capture turns them into CaptureFailed."""
        slots = self._template[:]
        for name, s in self._feed_slots:
            slots[s] = feed[name]
        program = self._program if len(self._programs) == 1 else \
            self._programs[self.point_for({n: tuple(feed[n].shape) for n in self.engine.input_names})]
        for index, kernel, copies, ins, outs, frees in program:
            self._current = index
            for hs, ds, name in copies:
                slots[ds] = self._to_device(name, slots[hs], host_values)
            if hook is not None:
                hook(index, "start")
            for s, t in zip(outs, kernel([slots[i] for i in ins])):
                slots[s] = t
            if hook is not None:
                hook(index, "end")
            for s in frees:
                slots[s] = None
        self._current = -1
        return {n: _dense(slots[d]) if d is not None else self._to_device(n, slots[h], host_values)
                for n, d, h in self._output_slots}

    def _to_device(self, name, t, host_values=None):
        if host_values is not None:
            if name not in host_values:
                host_values[name] = t.to(self.device)
            return host_values[name]
        return t.to(self.device)

    # ---- streams --------------------------------------------------------------------------------
    @contextmanager
    def _stream_scope(self):
        if self.stream is None or self.device.type != "cuda":
            yield
            return
        self.stream.wait_stream(torch.cuda.current_stream(self.device))   # inputs written on the caller's stream
        with torch.cuda.stream(self.stream):
            yield

    def synchronize(self) -> None:
        """Wait for this context's work (its stream, or the whole device)."""
        if self.device.type == "cuda":
            if self.stream is not None:
                self.stream.synchronize()
            else:
                torch.cuda.synchronize(self.device)


def _dense(t):
    """An engine output in row-major order, whatever layout its last kernel wrote (a channels-last convolution's
    NHWC y, a transposed view): one copy only for such outputs, as TensorRT's outputs are always linear."""
    return t.contiguous() if isinstance(t, torch.Tensor) and not t.is_contiguous() else t


@contextmanager
def _nothing():
    yield
