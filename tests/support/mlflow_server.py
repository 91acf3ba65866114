"""A real `mlflow server` (or `mlflow models serve`) on a free loopback port, in its own process
group, with a temporary SQLite backend and artifact folder; stopped with its whole group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import requests

from tests.support.torchserve import free_port

MLFLOW = Path(sys.executable).with_name("mlflow")


@contextlib.contextmanager
def running(args: list[str], log: Path, health: str, env: dict | None = None,
            timeout: float = 240) -> Iterator[None]:  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"{args[:3]} exited {proc.returncode}:\n{log.read_text()[-3000:]}"
                )
            with contextlib.suppress(requests.RequestException):
                if requests.get(health, timeout=2).ok:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{args[:3]} not healthy after {timeout}s:\n{log.read_text()[-3000:]}"
                )
            time.sleep(0.5)
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@contextlib.contextmanager
def mlflow_server(tmp: Path) -> Iterator[str]:
    """Yields the tracking URI (http://127.0.0.1:<port>) of a fresh tracking + registry server."""
    port = free_port()
    tmp.mkdir(parents=True, exist_ok=True)
    args = [str(MLFLOW), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
            "--backend-store-uri", f"sqlite:///{tmp / 'mlflow.db'}",
            "--artifacts-destination", str(tmp / "artifacts")]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    with running(args, tmp / "server.log", f"{url}/health"):
        yield url


@contextlib.contextmanager
def model_server(model_uri: str, tracking_uri: str, tmp: Path) -> Iterator[str]:
    """`mlflow models serve` of a registered version with the current environment (no installs,
    nothing fetched); yields its base URL."""
    port = free_port()
    args = [str(MLFLOW), "models", "serve", "-m", model_uri, "--env-manager", "local",
            "-h", "127.0.0.1", "-p", str(port), "-w", "1"]  # fmt: skip
    # It execs `uvicorn` by name: the venv's bin must be on PATH, as with an activated venv.
    path = f"{MLFLOW.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    # It downloads the model into a temp folder it never removes: the test's own.
    (tmp / "models-serve-tmp").mkdir(exist_ok=True)
    env = os.environ | {
        "MLFLOW_TRACKING_URI": tracking_uri,
        "PATH": path,
        "TMPDIR": str(tmp / "models-serve-tmp"),
    }
    url = f"http://127.0.0.1:{port}"
    with running(args, tmp / "models-serve.log", f"{url}/ping", env=env):
        yield url


@contextlib.contextmanager
def own_store(uri: str) -> Iterator[str]:
    """Tracking and registry at `uri` for this process and the processes it starts, restored
    after. The registry follows the tracking URI: nothing pins it (`mlflow.set_registry_uri`
    cannot be undone: restoring the value it read back pins the registry, process-wide and in
    MLFLOW_REGISTRY_URI, to whatever the tracking URI was then, and every later
    `MlflowClient(server)` reads its registry from there)."""
    import mlflow
    import pytest

    before = mlflow.get_tracking_uri()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MLFLOW_TRACKING_URI", uri)
        env.delenv("MLFLOW_REGISTRY_URI", raising=False)
        mlflow.set_tracking_uri(uri)
        try:
            yield uri
        finally:
            mlflow.set_tracking_uri(before)
