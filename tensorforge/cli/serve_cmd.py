"""`tensorforge serve ENGINE...`: serve engines over the Open Inference Protocol (HTTP + gRPC) with Ray Serve.

Entry point: `run(argv) -> exit code`. One Ray Serve application per engine (serve/app.py); locally it starts Ray,
deploys, prints the endpoints and serves until Ctrl-C; with --address it deploys onto that cluster and returns
(the applications keep running there). --emit-config prints the `serve deploy` config or a KubeRay RayService
instead of starting anything. Ray is imported only here, never by `import tensorforge`.
"""

import argparse
import signal
import sys
import time

from ..util.errors import UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"serve: {message}", "see tensorforge serve --help")


def _replicas(text: str):
    if text == "auto":
        return "auto"
    try:
        n = int(text)
    except ValueError:
        raise UsageError(f"--replicas {text!r} is not a count or 'auto'", "use e.g. --replicas 2") from None
    if n < 1:
        raise UsageError(f"--replicas {n} is not positive", "use 1 or more, or 'auto'")
    return n


def _parser() -> _Parser:
    p = _Parser(prog="tensorforge serve", description="Serve engines with Ray Serve over the Open Inference "
                "Protocol (KServe v2): HTTP (JSON and binary tensors) and gRPC; tritonclient talks to it.")
    p.add_argument("engines", nargs="+", metavar="ENGINE", help="engine files, one application each")
    p.add_argument("--name", action="append", default=[], help="application/model name (repeat per engine; "
                   "default: the engine file's stem)")
    p.add_argument("--replicas", default="1", help="replicas per engine, or 'auto' (autoscale 1..--max-replicas)")
    p.add_argument("--max-replicas", type=int, default=4, help="upper bound for --replicas auto (default 4)")
    p.add_argument("--gpus-per-replica", type=float, default=None,
                   help="GPUs per replica (fractions share a GPU; default 1 when Ray sees GPUs, else 0)")
    p.add_argument("--cpus-per-replica", type=float, default=1.0, help="CPUs reserved per replica (default 1)")
    p.add_argument("--max-batch-size", type=int, default=None, help="rows per batch (default: the engine's "
                   "profile maximum)")
    p.add_argument("--batch-wait-ms", type=float, default=2.0, help="how long a batch waits to fill (default 2)")
    p.add_argument("--max-ongoing", type=int, default=64, help="requests in flight per replica (default 64)")
    p.add_argument("--max-queued", type=int, default=256, help="queued requests before HTTP 503 (default 256)")
    p.add_argument("--http-port", type=int, default=8000)
    p.add_argument("--grpc-port", type=int, default=9000)
    p.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1)")
    p.add_argument("--address", default=None, help="an existing Ray cluster (ray://host:10001 or auto)")
    p.add_argument("--emit-config", choices=["serve", "rayservice"], default=None,
                   help="print the `serve deploy` config or a KubeRay RayService for these engines, start nothing")
    p.add_argument("--image", default="rayproject/ray:2.60.0-py311-gpu", help="container image (rayservice)")
    p.add_argument("--verbose", "-v", action="store_true", help="show tracebacks on errors")
    return p


def _specs(args, gpus: float):
    from ..serve.app import AppSpec
    if args.name and len(args.name) != len(args.engines):
        raise UsageError(f"{len(args.name)} --name for {len(args.engines)} engines", "give one --name per engine")
    names = args.name or [None] * len(args.engines)
    return [AppSpec(engine, name=name, replicas=_replicas(args.replicas), max_replicas=args.max_replicas,
                    gpus_per_replica=gpus, cpus_per_replica=args.cpus_per_replica,
                    max_batch_size=args.max_batch_size, batch_wait_ms=args.batch_wait_ms,
                    max_ongoing_requests=args.max_ongoing, max_queued_requests=args.max_queued)
            for engine, name in zip(args.engines, names)]


def run(argv) -> int:
    args = _parser().parse_args(argv)
    from ..serve import app
    if args.emit_config:
        specs = _specs(args, args.gpus_per_replica if args.gpus_per_replica is not None else 1.0)
        app.check_specs(specs)
        sys.stdout.write(app.emit_config(specs, args.emit_config, args.http_port, args.grpc_port, image=args.image))
        return 0
    try:
        import ray
    except ImportError:
        raise UsageError("serving needs Ray Serve", "pip install 'tensorforge[serve]'") from None
    specs = _specs(args, args.gpus_per_replica or 0.0)
    app.check_specs(specs)
    app.start(args.http_port, args.grpc_port, args.host, args.address)
    if args.gpus_per_replica is None and ray.cluster_resources().get("GPU", 0) > 0:
        for s in specs:
            s.gpus_per_replica = 1.0
    names = [app.run_application(s, root=i == 0) for i, s in enumerate(specs)]
    for n in names:
        print(f"serving {n}: http://{args.host}:{args.http_port}/v2/models/{n}  grpc {args.host}:{args.grpc_port} "
              f"(metadata application={n})")
    if args.address:
        return 0

    def _stop(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, _stop)         # `kill` stops it as cleanly as Ctrl-C: Ray shut down, no orphans
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        from ray import serve
        serve.shutdown()
    return 0
