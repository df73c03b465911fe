"""Which layers keep an engine out of CUDA graphs, found at build time (issue 15 item 4).

The runtime captures an engine's run in a CUDA graph and, when a layer synchronises with the host, runs it
uncaptured and names that layer (`ExecutionContext.graph_blockers`). A user reading only the build log or
`inspect` would not know until a run. So a timed CUDA build runs its chosen network at the opt point twice
(`NetworkProgram`, the kernels the engine stores, intermediates freed as the runtime frees them): once plain, as the
runtime's warm-up does (lazy cuBLAS handles and first-call caches may synchronise once), then one layer at a time,
each with torch's sync debug mode set to "warn": a layer whose kernel synchronises with the host — reads a
value back (`.item()`, `.tolist()`), has a data-dependent output shape (NonZero, Unique, boolean indexing), or
copies host data to the device on every call (`torch.tensor(list, device=cuda)`) — raises torch's
"called a synchronizing CUDA operation" warning during its own call, and is recorded with that message. That is
the same condition the runtime's warm-up check tests before its capture (cuda_graph.py), so the two agree.

What the report holds (`build_info["graph_capture"]`, data only): `checked` (bool), `point` ("opt"), `blockers`
[{layer, op, tactic, reason}], or `why` when not checked (a CPU build: no CUDA graphs; an untimed build: no
program). Cost: two runs of the network at the opt point, the second with a mode switch per layer (unmeasured on the
zoo; one run of a zoo engine is 0.3–3 ms). Shape points other than opt may choose other kernels (point_tactics.py);
the probe does not cover those. Checked on an H100: a NonZero network's report names both NonZero layers.
The sync debug mode is process-global, as it is for the tactic timer's capture check (validation.try_capture): a
build that shares its process with other threads' CUDA work may see their synchronisations attributed to its layers.
"""

import warnings
from typing import Callable

import torch

from ..ir import Network
from ..util.log import get_logger

# A detector runs `call()` and returns why it synchronised with the host, or None when it did not.
Detector = Callable[[Callable[[], object]], "str | None"]


def cuda_sync_detector(call) -> str | None:
    """torch's sync debug mode at "warn" around `call()`: the first synchronisation warning's text, or None."""
    old = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            call()
        finally:
            torch.cuda.set_sync_debug_mode(old)
    for w in seen:
        text = str(w.message)
        if "synchroniz" in text.lower():
            return text.splitlines()[0]
    return None


def graph_blockers(net: Network, program, detect: Detector) -> list[dict]:
    """Every device layer of `program` (a NetworkProgram of `net`) whose call `detect` finds synchronising,
    in network order, as {layer, op, tactic, reason}. The program runs to the end: one blocker does not hide
    the next."""
    ops = {layer.name: layer.op for layer in net.layers}
    found: list[dict] = []

    def each(name: str, call):
        box = []
        reason = detect(lambda: box.append(call()))
        if reason is not None:
            found.append({"layer": name, "op": ops.get(name, "?"), "tactic": program.choice.get(name, "?"),
                          "reason": reason})
        return box[0]
    program.run()           # warm-up, as the runtime's: lazy library handles and first-call caches may sync once
    program.run(each=each)
    return found


def detector_for(device) -> Detector | None:
    """The sync detector of a device: torch's sync debug mode on CUDA; None elsewhere (no CUDA graphs there)."""
    return cuda_sync_detector if getattr(device, "type", str(device)) == "cuda" else None


def graph_capture_report(net: Network, program, device, detect: Detector | None) -> dict:
    """build_info["graph_capture"] for a build whose chosen network is `program` (None: not made), found with
    `detect` (None: not checked); logs one warning per blocker."""
    if detect is None:
        return {"checked": False, "why": f"{getattr(device, 'type', device)} build: no CUDA graphs"}
    if program is None:
        return {"checked": False, "why": "no timed network program (optimisation level 0, or it failed to build)"}
    try:
        blockers = graph_blockers(net, program, detect)
    except Exception as e:  # noqa: BLE001 - a report, never a build failure; it says so
        why = f"the probe run failed ({type(e).__name__}: {(str(e).splitlines() or [''])[0]})"
        get_logger().warning(f"CUDA-graph check not made: {why}")
        return {"checked": False, "why": why}
    for b in blockers:
        get_logger().warning(f"layer {b['layer']!r} ({b['op']}, tactic {b['tactic']}) synchronises with the host: "
                             f"the engine will run without CUDA graphs ({b['reason']})")
    return {"checked": True, "point": "opt", "blockers": blockers}


def capture_line(info: dict | None) -> str:
    """`inspect`'s line from build_info["graph_capture"] (the build log has one warning per blocker instead)."""
    if not info:
        return "CUDA graphs: not checked at build (engine built before the check existed)"
    if not info.get("checked"):
        return f"CUDA graphs: not checked at build ({info.get('why', '?')})"
    blockers = info.get("blockers") or []
    if not blockers:
        return "CUDA graphs: no layer synchronises with the host at the opt point (capturable)"
    names = ", ".join(f"{b.get('layer')} ({b.get('op')})" for b in blockers[:5])
    more = f" and {len(blockers) - 5} more" if len(blockers) > 5 else ""
    return f"CUDA graphs: blocked by {len(blockers)} layer(s) that synchronise with the host: {names}{more}"
