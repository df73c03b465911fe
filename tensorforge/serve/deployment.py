"""ModelServer: the Ray Serve deployment that owns one loaded engine per replica and speaks v2 over HTTP and gRPC.

The engine arrives as a file path in the deployment's `user_config` (never pickled); `reconfigure` loads it, warms
it up and only then swaps it in, so a new path swaps the engine in place, and a replica whose engine fails to load
raises (the deployment does not go healthy; the reason is in `serve status`). Requests are checked one by one,
then batched with `@serve.batch` (row budget = the engine's batch maximum, two batches in flight) and executed in a
worker thread; a request reaching an idle replica (nothing running, nothing waiting) runs at once, unbatched. Metrics go through `ray.serve.metrics` (Prometheus on the Ray node's metrics port).
"""

import asyncio
import os
import re
import time

import grpc
import numpy as np
import torch
from ray import serve
from ray.serve import metrics
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..util.errors import TensorforgeError
from ..version import __version__
from . import grpc_codec, protocol
from .grpc_service import pb
from .model import EngineModel, RequestError

_ROUTE = re.compile(r"^/v2(?:/health/(?P<health>live|ready)|/models/(?P<model>[^/]+)(?:/versions/(?P<version>[^/]+))?"
                    r"(?P<action>/ready|/infer|/stats)?)?/?$")
_BOUNDS_ROWS = [1.5, 2.5, 4.5, 8.5, 16.5, 32.5, 64.5, 128.5, 256.5]
_BOUNDS_MS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 1000]
EXTENSIONS = ["binary_tensor_data", "statistics"]


def _rows(items) -> int:
    return sum(item[0] for item in items)


class ModelServer:
    """One replica. `server_routes`: this replica also answers /v2 and /v2/health (the first application)."""

    def __init__(self, server_routes: bool = False):
        self.server_routes = server_routes
        self.model: EngineModel | None = None
        self.config: dict = {}
        self._waiting = 0       # requests handed to the batcher and not yet picked up by a batch
        self._running = 0       # engine runs in progress (batches or lone requests)
        tags = ("model", "protocol", "code")
        self.m_requests = metrics.Counter("tensorforge_requests", "v2 requests answered", tag_keys=tags)
        self.m_rows = metrics.Histogram("tensorforge_batch_rows", "rows per engine run (batched requests)",
                                        boundaries=_BOUNDS_ROWS, tag_keys=("model",))
        self.m_queue = metrics.Histogram("tensorforge_queue_ms", "ms from request checked to its batch starting",
                                         boundaries=_BOUNDS_MS, tag_keys=("model",))
        self.m_engine = metrics.Histogram("tensorforge_engine_ms", "ms of one engine run (one batch)",
                                          boundaries=_BOUNDS_MS, tag_keys=("model",))

    # ---- lifecycle --------------------------------------------------------------------------
    def reconfigure(self, config: dict) -> None:
        """`config`: {"engine": path, "name", "max_batch_size", "batch_wait_ms", "device"}; load + warm-up, then swap."""
        model = EngineModel(config["engine"], name=config.get("name"), device=config.get("device"),
                            max_batch_size=config.get("max_batch_size"))
        model.warmup()
        self._batched.set_max_batch_size(model.max_batch_size or 1)
        self._batched.set_batch_wait_timeout_s(float(config.get("batch_wait_ms", 2.0)) / 1000.0)
        self.model, self.config = model, dict(config)

    def placement(self) -> dict:
        """Where this replica runs (tests and `serve status` users): pid, visible GPUs, engine device."""
        return {"pid": os.getpid(), "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "device": str(self.model.device), "engine": self.model.path, "contexts": self.model.n_contexts}

    # ---- execution --------------------------------------------------------------------------
    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.002, max_concurrent_batches=2, batch_size_fn=_rows)
    async def _batched(self, items: list) -> list:
        self._waiting -= len(items)
        return await self._execute(items)

    async def _execute(self, items: list) -> list:
        model = self.model
        start = time.perf_counter()
        for _, _, queued in items:
            self.m_queue.observe((start - queued) * 1e3, tags={"model": model.name})

        def work():
            outs = model.run_batch([feed for _, feed, _ in items])
            return [{k: v.cpu().numpy() for k, v in out.items()} for out in outs]
        self._running += 1
        try:
            results = await asyncio.get_running_loop().run_in_executor(None, work)
        except Exception as e:  # noqa: BLE001 - every request of the batch gets the batch's error
            return [e] * len(items)
        finally:
            self._running -= 1
        rows = _rows(items)
        self.m_rows.observe(rows, tags={"model": model.name})
        self.m_engine.observe((time.perf_counter() - start) * 1e3, tags={"model": model.name})
        return results

    async def _infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        model = self.model
        rows = model.check({k: (_v2(v), tuple(v.shape)) for k, v in feeds.items()})
        tensors = {k: torch.from_numpy(v if v.flags.writeable else v.copy()) for k, v in feeds.items()}
        item = (rows, tensors, time.perf_counter())
        if self._running == 0 and self._waiting == 0:
            # an idle replica runs a lone request at once: waiting batch_wait_ms for company only pays under load
            (result,) = await self._execute([item])
        else:
            self._waiting += 1
            result = await self._batched(item)
        if isinstance(result, Exception):
            raise result
        return result

    # ---- HTTP -------------------------------------------------------------------------------
    async def __call__(self, request: Request) -> Response:
        match = _ROUTE.match(request.url.path)
        if match is None:
            return _error(404, f"no v2 route {request.url.path}")
        model = self.model
        if match["health"]:
            return Response(status_code=200 if model is not None else 503)
        if match["model"] is None:
            if not self.server_routes:
                return _error(404, f"no v2 route {request.url.path}")
            return JSONResponse({"name": "tensorforge", "version": __version__, "extensions": EXTENSIONS})
        if match["model"] != model.name or match["version"] not in (None, model.version):
            return _error(404, f"model {match['model']!r} version {match['version'] or 'any'} is not served here")
        action = match["action"]
        if action is None:
            return JSONResponse(model.metadata())
        if action == "/ready":
            return Response(status_code=200)
        if action == "/stats":
            return JSONResponse(self.statistics())
        if request.method != "POST":
            return _error(405, f"{request.url.path} takes POST")
        code = "200"
        try:
            body = await request.body()
            head, feeds = protocol.decode_request(body, request.headers.get("Inference-Header-Content-Length"))
            outputs = await self._infer(feeds)
            data, n = protocol.encode_response(head, model.name, model.version, outputs, model.engine.output_names)
        except RequestError as e:
            code = "400"
            return _error(400, str(e))
        except TensorforgeError as e:
            code = "500"
            return _error(500, str(e))
        finally:
            self.m_requests.inc(tags={"model": model.name, "protocol": "http", "code": code})
        if n is None:
            return Response(data, media_type="application/json")
        return Response(data, media_type="application/octet-stream",
                        headers={"Inference-Header-Content-Length": str(n)})

    def statistics(self) -> dict:
        """Triton's statistics extension: executions per batch size (this replica)."""
        model = self.model
        with model._stats_lock:
            stats = sorted(model.batch_stats.items())
        batch = [{"batch_size": b, "compute_infer": {"count": c, "ns": ns}} for b, (c, ns) in stats]
        return {"model_stats": [{"name": model.name, "version": model.version,
                                 "inference_count": sum(b * c for b, (c, _) in stats),
                                 "execution_count": sum(c for _, (c, _) in stats), "batch_stats": batch}]}

    # ---- gRPC (method names are the service's) ------------------------------------------------
    def ServerLive(self, request):
        return pb.ServerLiveResponse(live=True)

    def ServerReady(self, request):
        return pb.ServerReadyResponse(ready=self.model is not None)

    def ServerMetadata(self, request):
        return pb.ServerMetadataResponse(name="tensorforge", version=__version__, extensions=EXTENSIONS)

    def ModelReady(self, request, grpc_context):
        return pb.ModelReadyResponse(ready=self._grpc_model(request.name, request.version, grpc_context))

    def ModelMetadata(self, request, grpc_context):
        if not self._grpc_model(request.name, request.version, grpc_context):
            return pb.ModelMetadataResponse()
        return grpc_codec.metadata_response(self.model.metadata())

    async def ModelInfer(self, request, grpc_context):
        model = self.model
        if not self._grpc_model(request.model_name, request.model_version, grpc_context):
            return pb.ModelInferResponse()
        code = "OK"
        try:
            outputs = await self._infer(grpc_codec.decode_request(request))
            return grpc_codec.encode_response(request, model.name, model.version, outputs, model.engine.output_names)
        except RequestError as e:
            code = "INVALID_ARGUMENT"
            grpc_context.set_code(grpc.StatusCode.INVALID_ARGUMENT)
            grpc_context.set_details(str(e))
        except TensorforgeError as e:
            code = "INTERNAL"
            grpc_context.set_code(grpc.StatusCode.INTERNAL)
            grpc_context.set_details(str(e))
        finally:
            self.m_requests.inc(tags={"model": model.name, "protocol": "grpc", "code": code})
        return pb.ModelInferResponse()

    def _grpc_model(self, name, version, grpc_context) -> bool:
        model = self.model
        if name == model.name and version in ("", model.version):
            return True
        grpc_context.set_code(grpc.StatusCode.NOT_FOUND)
        grpc_context.set_details(f"model {name!r} version {version or 'any'} is not served by application "
                                 f"{model.name!r} (send the gRPC metadata application={name})")
        return False


def _v2(arr: np.ndarray) -> str:
    from .datatypes import v2_of_numpy
    return v2_of_numpy(arr.dtype)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)
