"""The torch peers of BENCH.md, built and timed one at a time in the same process as the engine.

Entry points: `time_peers(model, inputs, selected, time_fn, log)` → {peer name: stats or {"error": …}}, and
`strongest(runners)` → (name, median ms) of the fastest peer that ran. Peers (PEERS, in order):
    eager, eager+graph                    torch eager, and eager captured in a CUDA graph;
    compile, compile+graph                torch.compile default mode, called plainly and captured;
    freeze+graph                          torch.compile with inductor's `freezing = True` (BatchNorm folded, weights
                                          constant-folded, as our ONNX input already is), captured;
    max-autotune+graph                    mode="max-autotune-no-cudagraphs" with freezing, captured (slow: ≈ 270 s
                                          for resnet50, so run.py runs it only on a named subset).
`tf-backend` (BACKEND) is ours — torch.compile(backend="tensorforge"), timed by backend_runner.py — so `strongest`
leaves it out with "tensorforge".
Each compiled peer starts from a reset dynamo/inductor state and is timed before the next is built: a reset frees the
compiled module (its frozen constants included), which a captured graph of it still reads. `freezing` is a global
config, set only inside `inductor_freezing(...)` and restored on exit. A peer that fails is reported with its
error, never dropped. Compile time (first call, synchronised) is recorded as `compile_s`.
"""

import contextlib
import time

PEERS = ["eager", "eager+graph", "compile", "compile+graph", "freeze+graph", "max-autotune+graph"]
COMPILED = {  # peer family → (torch.compile mode, freezing, names it yields)
    "compile": (None, False, ("compile", "compile+graph")),
    "freeze": (None, True, ("freeze+graph",)),
    "max-autotune": ("max-autotune-no-cudagraphs", True, ("max-autotune+graph",)),
}
CONTINUITY = "compile+graph"     # the peer every earlier run reported against
BACKEND = "tf-backend"           # ours through torch.compile(backend="tensorforge"): a runner, never a peer
OURS = ("tensorforge", BACKEND)
RESELECT_MAX_AUTOTUNE = False    # run.py --prewarmed: max-autotune chooses its kernels again here (idle GPU)


def _first_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"


@contextlib.contextmanager
def inductor_freezing(on: bool):
    """Set `torch._inductor.config.freezing` for the duration, restoring the old value even on error."""
    import torch._inductor.config as cfg
    old = cfg.freezing
    cfg.freezing = on
    try:
        yield
    finally:
        cfg.freezing = old


def reset_compiler() -> None:
    """Forget every compiled graph (dynamo caches, inductor's in-memory state) before the next peer."""
    import gc

    import torch
    torch._dynamo.reset()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def capture(fn, *, warmup: int = 3):
    """Capture `fn()` in a CUDA graph; returns a callable that replays it (torch's recipe: warm-up on a side
    stream, capture on it, the replay reads the static inputs that `fn` closes over)."""
    import torch
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay          # the bound method keeps the graph alive


def _sync(device_is_cuda: bool) -> None:
    if device_is_cuda:
        import torch
        torch.cuda.synchronize()


def time_peers(model, inputs: tuple, selected: list[str], time_fn, log=print, cuda: bool = True,
               profile=None) -> dict:
    """Time every peer in `selected` (names from PEERS) on `inputs` (static device tensors). `time_fn(fn)` → stats
    dict. Graph peers need `cuda`; on the CPU they are reported as not applicable. `profile(name, replay)`, when
    given, is called for each compiled peer's CUDA graph right after it is timed (kernel profiles of a row)."""
    import torch
    out: dict = {}

    def eager():
        with torch.inference_mode():
            return model(*inputs)
    if "eager" in selected:
        out["eager"] = time_fn(eager)
    if "eager+graph" in selected:
        out["eager+graph"] = _graph_peer(eager, time_fn, cuda)
    for family, (mode, freezing, names) in COMPILED.items():
        wanted = [n for n in names if n in selected]
        if not wanted:
            continue
        if not cuda and all(n.endswith("+graph") for n in wanted):
            out.update({n: {"error": "no CUDA graphs on the CPU"} for n in wanted})
            continue
        reset_compiler()
        try:
            out.update(_compiled_peer(model, inputs, mode, freezing, wanted, time_fn, cuda, profile))
        except Exception as e:  # noqa: BLE001 - reported in the results, the run goes on
            out.update({n: {"error": f"torch.compile failed: {_first_line(e)}"} for n in wanted})
        finally:
            reset_compiler()
        for n in wanted:
            log(f"  peer {n}: {_fmt(out[n])}")
    return out


def _fmt(st: dict) -> str:
    if "error" in st:
        return st["error"]
    extra = f", compile {st['compile_s']:.1f} s" if "compile_s" in st else ""
    return f"{st['median_ms']:.4f} ms (spread {st['spread_pct']}%{extra})"


def _graph_peer(fn, time_fn, cuda: bool, name: str = "", profile=None) -> dict:
    if not cuda:
        return {"error": "no CUDA graphs on the CPU"}
    try:
        replay = capture(fn)
    except Exception as e:  # noqa: BLE001
        return {"error": f"capture failed: {_first_line(e)}"}
    st = time_fn(replay)
    if profile is not None:
        profile(name, replay)
    return st


def _compiled_peer(model, inputs, mode, freezing, wanted, time_fn, cuda, profile=None) -> dict:
    """Compile, time the first call (compile time), time the plain call and/or its CUDA graph, all inside the
    freezing context (guards that fail later would otherwise recompile without it)."""
    import torch
    out: dict = {}
    # freezing folds weights only without autograd: no_grad is inductor's documented inference path for it
    grad_ctx = torch.no_grad if freezing else torch.inference_mode
    reselect = contextlib.nullcontext()
    if mode and RESELECT_MAX_AUTOTUNE:     # a prewarmed FX graph would carry the choices made under the prewarm's load
        import torch._inductor.config as cfg
        reselect = cfg.patch(fx_graph_cache=False)
    with inductor_freezing(freezing), reselect:
        compiled = torch.compile(model, mode=mode) if mode else torch.compile(model)

        def call():
            with grad_ctx():
                return compiled(*inputs)
        t0 = time.perf_counter()
        call()
        _sync(cuda)
        compile_s = round(time.perf_counter() - t0, 3)
        for _ in range(2):
            call()
        _sync(cuda)
        for name in wanted:
            if name.endswith("+graph"):
                out[name] = _graph_peer(call, time_fn, cuda, name, profile)
            else:
                out[name] = time_fn(call)
            if "error" not in out[name]:
                out[name]["compile_s"] = compile_s
    return out


def torch_peers(model, inputs: tuple, use_compile: bool = True) -> dict:
    """The four classic peers as callables ({name: fn or error text}), for the GELU case (a pointwise graph: nothing
    for freezing to fold). The compiled ones share one compile; the caller resets dynamo after timing them."""
    import torch
    peers: dict = {}

    def eager():
        with torch.inference_mode():
            return model(*inputs)
    peers["eager"] = eager
    try:
        peers["eager+graph"] = capture(eager)
    except Exception as e:  # noqa: BLE001 - reported in the results
        peers["eager+graph"] = f"capture failed: {_first_line(e)}"
    if not use_compile:
        return peers
    try:
        compiled = torch.compile(model)

        def comp():
            with torch.inference_mode():
                return compiled(*inputs)
        for _ in range(3):
            comp()
        torch.cuda.synchronize()
        peers["compile"] = comp
    except Exception as e:  # noqa: BLE001
        peers["compile"] = f"torch.compile failed: {_first_line(e)}"
        peers["compile+graph"] = "torch.compile failed"
        return peers
    try:
        peers["compile+graph"] = capture(comp)
    except Exception as e:  # noqa: BLE001
        peers["compile+graph"] = f"capture failed: {_first_line(e)}"
    return peers


def strongest(runners: dict, exclude=OURS) -> tuple[str | None, float | None]:
    """The fastest peer that produced a time: (name, median ms), or (None, None) when none did.
    Ties go to the earlier peer in PEERS order (a stable choice)."""
    order = {n: i for i, n in enumerate(PEERS)}
    timed = [(st["median_ms"], order.get(name, len(order)), name) for name, st in runners.items()
             if name not in exclude and isinstance(st, dict) and st.get("median_ms")]
    if not timed:
        return None, None
    ms, _, name = min(timed)
    return name, ms


def ratios(runners: dict) -> dict:
    """tensorforge ÷ the strongest peer, and ÷ compile+graph (continuity with earlier runs); the torch.compile
    backend runner ÷ the strongest peer too, when it ran."""
    tf = runners.get("tensorforge", {}).get("median_ms")
    name, best = strongest(runners)
    cont = runners.get(CONTINUITY, {}).get("median_ms")
    be = runners.get(BACKEND, {}).get("median_ms")
    out = {"strongest_peer": name, "strongest_peer_ms": best,
           "ratio_vs_strongest": round(tf / best, 3) if tf and best else None,
           "ratio_vs_compile_graph": round(tf / cont, 3) if tf and cont else None}
    if be:
        out["backend_vs_strongest"] = round(be / best, 3) if best else None
        out["backend_vs_onnx_engine"] = round(be / tf, 3) if tf else None
    return out
