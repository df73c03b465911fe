"""Ray Serve applications for engines: one application per engine, started locally or on a cluster, or as YAML.

    apps = [AppSpec("resnet.engine", replicas=2, gpus_per_replica=1)]
    deploy(apps, http_port=8000, grpc_port=9000)            # ray.init + serve.start + serve.run, one app each
    print(emit_config(apps, kind="rayservice"))               # the same applications for `serve deploy` / KubeRay

The first application is mounted at "/" (it also answers /v2 and /v2/health/*), the others at /v2/models/<name>.
gRPC picks the application by the `application` metadata key (any when only one is served).
"""

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..util.errors import FileNotFound, UsageError

DEPLOYMENT = "ModelServer"


@dataclass
class AppSpec:
    engine: str
    name: str | None = None
    replicas: int | str = 1                 # N or "auto" (autoscaling between 1 and max_replicas)
    max_replicas: int = 4
    gpus_per_replica: float = 0.0
    cpus_per_replica: float = 1.0
    max_batch_size: int | None = None       # None: the engine's profile maximum
    batch_wait_ms: float = 2.0
    max_ongoing_requests: int = 64          # per replica; more wait in the router queue
    max_queued_requests: int = 256          # beyond this the router sheds (HTTP 503)
    device: str | None = None
    load_retries: int = 3                   # replica starts that may fail before the application is failed
    extra: dict = field(default_factory=dict)

    @property
    def app_name(self) -> str:
        return self.name or Path(self.engine).stem


def check_specs(specs: list[AppSpec]) -> None:
    names = [s.app_name for s in specs]
    for s in specs:
        if not Path(s.engine).is_file():
            raise FileNotFound(f"engine file {s.engine} does not exist", "give the path of a built engine")
        if s.replicas != "auto" and (not isinstance(s.replicas, int) or s.replicas < 1):
            raise UsageError(f"--replicas {s.replicas!r} is not a positive count or 'auto'", "use e.g. --replicas 2")
        if s.gpus_per_replica < 0:
            raise UsageError(f"--gpus-per-replica {s.gpus_per_replica} is negative", "use 0, a fraction or a count")
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise UsageError(f"two engines share the application name {sorted(dup)[0]!r}", "give each one --name")


def deployment_options(spec: AppSpec, engine_path: str) -> dict:
    opts = {"name": DEPLOYMENT, "max_ongoing_requests": spec.max_ongoing_requests,
            "max_queued_requests": spec.max_queued_requests,
            "ray_actor_options": {"num_gpus": spec.gpus_per_replica, "num_cpus": spec.cpus_per_replica},
            "user_config": {"engine": engine_path, "name": spec.app_name, "max_batch_size": spec.max_batch_size,
                            "batch_wait_ms": spec.batch_wait_ms, "device": spec.device},
            "health_check_period_s": 2, "graceful_shutdown_timeout_s": 2,
            "max_constructor_retry_count": spec.load_retries}
    if spec.replicas == "auto":
        opts["autoscaling_config"] = {"min_replicas": 1, "max_replicas": spec.max_replicas,
                                      "target_ongoing_requests": max(2, spec.max_ongoing_requests // 2)}
    else:
        opts["num_replicas"] = spec.replicas
    return opts


def build_application(spec: AppSpec, server_routes: bool = False):
    """The bound application for one engine (the engine travels as its absolute path)."""
    from ray import serve

    from .deployment import ModelServer
    opts = deployment_options(spec, os.path.abspath(spec.engine))
    # A stable code version (Serve's own is random per serve.run): a redeploy that changes only user_config (the
    # engine path, batch settings) then calls `reconfigure` on the running replicas instead of replacing them.
    # `version` is accepted by Ray 2.60 only with _internal=True (requirements pin ray).
    return serve.deployment(ModelServer).options(**opts, version=code_version(), _internal=True).bind(server_routes)


def code_version() -> str:
    import hashlib

    from ..version import __version__
    here = Path(__file__).parent
    digest = hashlib.sha256()
    for name in ("deployment.py", "model.py", "protocol.py", "grpc_codec.py"):
        digest.update((here / name).read_bytes())
    return f"{__version__}-{digest.hexdigest()[:12]}"


def app_builder(args: dict):
    """`import_path: tensorforge.serve.app:app_builder` for `serve deploy` configs; `args` are AppSpec fields."""
    args = dict(args)
    server_routes = bool(args.pop("server_routes", False))
    return build_application(AppSpec(**args), server_routes)


def grpc_options(port: int) -> dict:
    from .grpc_service import SERVICER
    return {"port": port, "grpc_servicer_functions": [SERVICER]}


def start(http_port: int = 8000, grpc_port: int = 9000, host: str = "127.0.0.1", address: str | None = None,
          ray_init: dict | None = None) -> None:
    """Connect to (or start) Ray and start Serve's HTTP and gRPC proxies."""
    import ray
    from ray import serve
    if not ray.is_initialized():
        ray.init(address=address, **(ray_init or {}))
    serve.start(http_options={"host": host, "port": http_port}, grpc_options=grpc_options(grpc_port))


def run_application(spec: AppSpec, root: bool = False) -> str:
    """Run one engine's application (mounted at "/" when `root`, else /v2/models/<name>) and wait until healthy.
    An engine that fails to load raises UsageError with the replica's reason; the application is removed again."""
    from ray import serve
    prefix = "/" if root else f"/v2/models/{spec.app_name}"
    try:
        serve.run(build_application(spec, server_routes=root), name=spec.app_name, route_prefix=prefix)
    except RuntimeError as e:
        reason = _deployment_message(spec.app_name) or _first_reason(e)
        serve.delete(spec.app_name)
        raise UsageError(f"application {spec.app_name!r} did not become healthy: {reason}",
                         "check the engine file; run with --verbose for Ray's log") from e
    return spec.app_name


def _deployment_message(app_name: str) -> str | None:
    """The replica's own error as Serve's controller recorded it (the serve.run exception only says 'failed')."""
    from ray import serve
    try:
        app = serve.status().applications.get(app_name)
        message = app.deployments[DEPLOYMENT].message if app and DEPLOYMENT in app.deployments else ""
    except Exception:  # noqa: BLE001 - the status is a nicety; the caller has a reason of its own
        return None
    return _first_reason(RuntimeError(message)) if message else None


def deploy(specs: list[AppSpec], http_port: int = 8000, grpc_port: int = 9000, host: str = "127.0.0.1",
           address: str | None = None, ray_init: dict | None = None) -> list[str]:
    """start() then run_application() for every engine (the first mounted at "/"); returns the application names."""
    check_specs(specs)
    start(http_port, grpc_port, host, address, ray_init)
    return [run_application(spec, root=i == 0) for i, spec in enumerate(specs)]


def _first_reason(e: Exception) -> str:
    text = str(e)
    for marker in ("EngineLoadError:", "TensorforgeError:"):
        if marker in text:
            return text.split(marker, 1)[1].strip().splitlines()[0]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else type(e).__name__


def serve_config(specs: list[AppSpec], http_port: int = 8000, grpc_port: int = 9000) -> dict:
    """The `serve deploy` config (Ray's ServeDeploySchema) for the same applications."""
    from .grpc_service import SERVICER     # noqa: F401 - the proxy must import it; fail here if tritonclient is absent
    apps = []
    for i, spec in enumerate(specs):
        args = {k: v for k, v in asdict(spec).items() if k != "extra" and v is not None}
        args["server_routes"] = i == 0
        apps.append({"name": spec.app_name, "route_prefix": "/" if i == 0 else f"/v2/models/{spec.app_name}",
                     "import_path": "tensorforge.serve.app:app_builder", "args": args})
    return {"proxy_location": "EveryNode", "http_options": {"host": "0.0.0.0", "port": http_port},
            "grpc_options": grpc_options(grpc_port), "applications": apps}


def rayservice(specs: list[AppSpec], name: str, image: str, http_port: int = 8000, grpc_port: int = 9000) -> dict:
    """A KubeRay RayService: the serve config plus a head group and one GPU worker group."""
    import yaml
    gpus = max((s.gpus_per_replica for s in specs), default=0)
    want = sum((s.max_replicas if s.replicas == "auto" else s.replicas) * s.gpus_per_replica for s in specs)
    workers = max(1, int(-(-want // 1))) if gpus else 1
    worker_res = {"limits": {"nvidia.com/gpu": 1, "cpu": "8", "memory": "32Gi"}} if gpus else \
        {"limits": {"cpu": "8", "memory": "32Gi"}}

    def container(role, resources):
        return {"name": role, "image": image, "resources": resources,
                "ports": [{"containerPort": p, "name": n} for p, n in
                          ([(6379, "gcs"), (8265, "dashboard"), (http_port, "serve"), (grpc_port, "grpc")]
                           if role == "ray-head" else [])] or None}
    head = container("ray-head", {"limits": {"cpu": "4", "memory": "16Gi"}})
    head = {k: v for k, v in head.items() if v is not None}
    worker = {k: v for k, v in container("ray-worker", worker_res).items() if v is not None}
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": name},
            "spec": {"serveConfigV2": yaml.safe_dump(serve_config(specs, http_port, grpc_port), sort_keys=False),
                     "rayClusterConfig": {
                         "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0", "num-gpus": "0"},
                                           "template": {"spec": {"containers": [head]}}},
                         "workerGroupSpecs": [{"groupName": "gpu" if gpus else "cpu", "replicas": workers,
                                               "minReplicas": 1, "maxReplicas": max(workers, 1),
                                               "rayStartParams": {},
                                               "template": {"spec": {"containers": [worker]}}}]}}}


def emit_config(specs: list[AppSpec], kind: str = "serve", http_port: int = 8000, grpc_port: int = 9000,
                name: str = "tensorforge", image: str = "rayproject/ray:2.60.0-py311-gpu") -> str:
    import yaml
    if kind == "serve":
        return yaml.safe_dump(serve_config(specs, http_port, grpc_port), sort_keys=False)
    if kind == "rayservice":
        return yaml.safe_dump(rayservice(specs, name, image, http_port, grpc_port), sort_keys=False)
    raise UsageError(f"--emit-config {kind!r} is not a config kind", "use 'serve' or 'rayservice'")
