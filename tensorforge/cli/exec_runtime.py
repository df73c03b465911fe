"""`tensorforge exec` glue for the runtime features of issue 5: layer information, the per-layer profile and
several inference streams. exec_cmd.py calls these three functions; the work is done in runtime/.

    --dumpLayerInfo / --exportLayerInfo=F      after the build (or load): runtime.profiler.layer_info
    --dumpProfile / --exportProfile=F          after the timed run: runtime.profiler.profile_layers, in a separate,
    --separateProfileRun                       uncaptured run (a CUDA graph cannot be timed per layer)
    --infStreams=N (--streams=N)               after the timed run: N contexts on N streams, throughput
"""

import time

from ..runtime.profiler import format_layer_info, layer_info, profile_layers, write_layer_info
from ..runtime.streams import StreamGroup


def report_layer_info(engine, opts, log) -> None:
    if opts.dump_layer_info:
        for line in format_layer_info(engine).splitlines():
            log.info(line)
    if opts.export_layer_info:
        write_layer_info(engine, opts.export_layer_info)
        log.info(f"Layer information written to {opts.export_layer_info} ({len(layer_info(engine)['Layers'])} layers)")


def describe_context(context, log) -> None:
    if context.graphs_enabled:
        log.info("CUDA graphs: on (one graph per input-shape signature, captured on first use)")
    else:
        log.info(f"CUDA graphs: off ({context.graph_disabled_reason})")


def after_benchmark(engine, context, feed: dict, opts, device, log) -> None:
    if opts.dump_profile or opts.export_profile:
        log.info("Profiling layers in a separate uncaptured run (CUDA events around every layer)"
                 if device.type == "cuda" else "Profiling layers in a separate run (host clock around every layer)")
        prof = profile_layers(context, feed, iterations=max(opts.iterations, 1))
        if opts.dump_profile:
            for line in prof.format_table().splitlines():
                log.info(line)
        if opts.export_profile:
            prof.write(opts.export_profile)
            log.info(f"Profile written to {opts.export_profile}")
    if opts.inf_streams > 1:
        _streams_throughput(engine, feed, opts, device, log)


def _streams_throughput(engine, feed, opts, device, log) -> None:
    """N contexts, one stream each, enqueued round-robin without waiting; queries / wall time over the run."""
    n = opts.inf_streams
    group = StreamGroup(engine, n, device, use_cuda_graph=opts.use_cuda_graph)
    feeds = [{k: v.to(device) for k, v in feed.items()} for _ in range(n)]
    for i in range(n):                                   # capture (or warm) every context once
        group.enqueue(feeds[i], i)
    group.synchronize()
    queries, t0 = 0, time.perf_counter()
    while queries < max(opts.iterations, n) or time.perf_counter() - t0 < max(opts.duration_s, 0.0):
        group.enqueue(feeds[queries % n], queries % n)
        queries += 1                                     # each stream runs its queries in order; no host wait
    group.synchronize()
    wall = time.perf_counter() - t0
    where = "streams" if device.type == "cuda" else "contexts, run one after another on the CPU"
    log.info(f"Throughput with {n} {where}: {queries / wall:.6g} qps ({queries} queries in {wall:.6g} s)")
