"""The peers of BENCH.md, in the same process: torch eager, eager in a CUDA graph, torch.compile (default mode)
called plainly, and torch.compile captured in a CUDA graph.

Entry point: `torch_peers(model, inputs, use_compile=True)` → {name: zero-argument callable or error text}.
A peer that cannot be built (compile error, a capture that syncs) is reported with its error, never dropped.
Graph capture follows torch's recipe: warm-up on a side stream, capture on it, replay reads the static inputs.
"""

import torch


def capture(fn, *, warmup: int = 3):
    """Capture `fn()` in a CUDA graph; returns a callable that replays it."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def _first_line(e: Exception) -> str:
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"


def torch_peers(model, inputs: tuple, use_compile: bool = True) -> dict:
    """`inputs` are device tensors used as the static inputs of every peer."""
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
