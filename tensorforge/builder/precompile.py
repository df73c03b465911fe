"""Triton kernels of the tactic candidates, found and compiled before they are timed (parallel cold builds).

Entry points: `discover_jobs(layer, found, inputs, device)` (build each fitting candidate, one dry call each:
the Triton compiles it would start, nothing compiled or launched — kernels/compile_cache.discover) and
`queue_ahead(layers, walk, pool, fitting)` (every layer to be timed, before the first one is: the jobs go to the
build's worker pool at once, so the workers compile layer k+1… while the builder times layer k). The pool knows
each variant by Triton's cache key, so a variant that many layers share is compiled once per build.
"""

import time

from ..kernels.compile_cache import discover
from ..util.log import get_logger


def discover_jobs(layer, found, inputs: list, device, keep: bool = True) -> tuple[dict, list]:
    """(built kernels by tactic id when `keep`, the compile jobs of every candidate that fits and builds).
    A candidate that does not fit or fails to build is skipped: the timing loop builds it again and records
    why it is rejected."""
    built, jobs = {}, []
    for tac, cfg in found:
        try:
            if tac.fits is not None and tac.fits(layer, cfg, inputs) is not None:
                continue
            kernel = tac.build(layer, cfg, device)
        except Exception:  # noqa: BLE001 - the timing loop builds it again and records why it fails
            continue
        if keep:
            built[tac.id(cfg)] = kernel
        jobs += discover(lambda: kernel(inputs))
    return built, jobs


def queue_ahead(layers, walk, pool, fitting) -> dict:
    """Queue the Triton compiles of every layer in `layers` that will be timed: `fitting(layer)` is None for a
    layer that is not, else a function of its inputs giving the candidates ((tactic, cfg) pairs) left to time. Inputs come from `walk` (the opt-point tensors);
    layers are walked in order, their outputs given the strides an untimed choice would produce (the builder's
    real choices may differ: a variant found only then is compiled when its layer is timed). Returns counts."""
    t0 = time.perf_counter()
    layers_queued = jobs = 0
    skipped: dict[str, str] = {}
    for layer in layers:
        try:
            select = fitting(layer)
            if select is not None:
                inputs = walk.materialize(layer)
                _, found_jobs = discover_jobs(layer, select(inputs), inputs, walk.device, keep=False)
                pool.submit(found_jobs)
                layers_queued += 1
                jobs += len(found_jobs)
                del inputs
        except Exception as e:  # noqa: BLE001 - that layer's kernels compile when it is timed; the reason is logged
            skipped[layer.name] = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"
        walk.untimed(layer)
    for name, why in skipped.items():
        get_logger().verbose(f"kernel precompile: layer {name} not queued ahead ({why}); compiled when timed")
    return {"layers": layers_queued, "jobs": jobs, "skipped": len(skipped), "seconds": time.perf_counter() - t0}
