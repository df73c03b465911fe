"""Servers for tests/serve: one local Ray cluster with Serve, and the real tritonserver, both on 127.0.0.1.

Both are started once per session and stopped at its end (bounded waits). `server` is parametrized over them.
tritonserver comes from scripts/setup.d/tritonserver.sh (run by scripts/setup.sh): when it is missing the tests
that need it FAIL, unless TFG_SKIP_TRITONSERVER=1 (a dev machine without it), which makes them skip.
Ray and tritonclient are installed by scripts/setup.sh (the `serve` extra); without them these tests fail too.
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from serve_models import build_engine  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
APP = "multi"


def free_port() -> int:
    """An ephemeral port (32768–60999 here): outside Ray's worker range 10002–19999."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout: float, what: str, step: float = 0.25):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as e:  # noqa: BLE001 - keep polling until the deadline
            last = e
        time.sleep(step)
    pytest.fail(f"{what} not within {timeout:.0f} s (last error: {last})")


@dataclass
class Server:
    kind: str
    http: str                                 # host:port
    grpc: str
    headers: dict = field(default_factory=dict)   # gRPC metadata picking the Ray application
    model: str = APP


@pytest.fixture(scope="session")
def engine_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("engines") / f"{APP}.engine"
    build_engine(path)
    return path


@pytest.fixture(scope="session")
def engine(engine_path):
    import tensorforge as tfg
    return tfg.load(engine_path, device="cpu")


def _need(module: str):
    try:
        return __import__(module)
    except ImportError:
        pytest.fail(f"{module} is not installed: run scripts/setup.sh (it installs tensorforge[serve])")


@pytest.fixture(scope="session")
def ray_cluster():
    """A local Ray cluster with 2 logical GPUs, Serve's proxies on free loopback ports; shut down afterwards."""
    _need("ray")
    _need("tritonclient")
    saved = {k: os.environ.get(k) for k in RAY_ENV}
    os.environ.update(RAY_ENV)
    temp = tempfile.mkdtemp(prefix="tfr", dir="/tmp")          # short: Ray's unix socket paths
    import ray
    from ray import serve

    from tensorforge.serve import app
    ports = {"http": free_port(), "grpc": free_port(), "metrics": free_port()}
    app.start(http_port=ports["http"], grpc_port=ports["grpc"],
              ray_init={"num_cpus": 8, "num_gpus": 2, "include_dashboard": False, "_temp_dir": temp,
                        "_node_ip_address": "127.0.0.1", "_metrics_export_port": ports["metrics"],
                        "log_to_driver": False})
    try:
        yield ports
    finally:
        serve.shutdown()
        ray.shutdown()
        if not os.environ.get("TFG_KEEP_RAY_LOGS"):
            shutil.rmtree(temp, ignore_errors=True)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def spec(engine_path, name=APP, **kw):
    from tensorforge.serve.app import AppSpec
    kw.setdefault("cpus_per_replica", 0.5)
    kw.setdefault("batch_wait_ms", 5.0)
    return AppSpec(str(engine_path), name=name, **kw)


@pytest.fixture(scope="session")
def ray_server(ray_cluster, engine_path):
    from tensorforge.serve import app
    app.run_application(spec(engine_path), root=True)
    return Server("ray", f"127.0.0.1:{ray_cluster['http']}", f"127.0.0.1:{ray_cluster['grpc']}",
                  headers={"application": APP})


def tritonserver_binary() -> str | None:
    path = os.environ.get("TFG_TRITONSERVER") or str(REPO / ".venv" / "tritonserver" / "bin" / "tritonserver")
    return path if os.access(path, os.X_OK) else None


@pytest.fixture(scope="session")
def triton_server(engine_path, tmp_path_factory):
    binary = tritonserver_binary()
    if binary is None:
        if os.environ.get("TFG_SKIP_TRITONSERVER") == "1":
            pytest.skip("tritonserver not set up and TFG_SKIP_TRITONSERVER=1")
        pytest.fail("tritonserver is missing: run scripts/setup.sh (scripts/setup.d/tritonserver.sh builds it), "
                    "or set TFG_SKIP_TRITONSERVER=1 on a machine without it")
    from tensorforge.serve.triton_export import export_repository
    repo = tmp_path_factory.mktemp("triton_repo")
    export_repository(engine_path, repo, name=APP)
    http, grpc_port = free_port(), free_port()
    log = open(repo.parent / "tritonserver.log", "wb")
    proc = subprocess.Popen([binary, f"--model-repository={repo}", "--http-address=127.0.0.1", f"--http-port={http}",
                             "--grpc-address=127.0.0.1", f"--grpc-port={grpc_port}", "--allow-metrics=false",
                             "--exit-timeout-secs=5"], stdout=log, stderr=subprocess.STDOUT)
    try:
        def ready():
            if proc.poll() is not None:
                return "exited"
            return urllib.request.urlopen(f"http://127.0.0.1:{http}/v2/health/ready", timeout=1).status == 200
        if wait_until(ready, 90, "tritonserver ready") == "exited":
            pytest.fail(f"tritonserver exited with {proc.returncode}: see {log.name}")
        yield Server("triton", f"127.0.0.1:{http}", f"127.0.0.1:{grpc_port}")
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


@pytest.fixture(params=["ray", "triton"])
def server(request) -> Server:
    return request.getfixturevalue(f"{request.param}_server")


def pytest_configure(config):
    config.addinivalue_line("markers", "serve_load: bounded load test of a served engine (≥ 2,000 requests)")
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:ray.*")
    config.addinivalue_line("filterwarnings", "ignore:.*PydanticDeprecatedSince20.*")


def pytest_terminal_summary(terminalreporter):
    from client_load import NOTES     # one module object for tests and this hook (conftest is loaded twice)
    if NOTES:
        terminalreporter.section("tests/serve measurements")
        for line in NOTES:
            terminalreporter.write_line(line)
