"""Start a real TorchServe from a temporary directory on free loopback ports, and stop it.

Each server gets its own working directory (key_file.json, logs) and its own TMPDIR, because the
TorchServe wrapper keeps its pid file in the temp dir: two servers must not share one.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

from deploy.serving import read_keys, render_properties, wait_ready
from deploy.ts_files import java_tmpdir
from rehearsal.pod import free_port

ROOT = Path(__file__).resolve().parents[2]
TORCHSERVE = Path(sys.executable).with_name("torchserve")


@dataclass
class TorchServe:
    workdir: Path
    store: Path
    models: list[str]
    overrides: dict[str, str] = field(default_factory=dict)
    """Extra config.properties settings on top of the repository's file."""
    env: dict[str, str] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    process: subprocess.Popen | None = None

    @property
    def inference_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['inference']}"

    @property
    def management_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['management']}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['metrics']}"

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.ports['grpc_inference']}"

    @property
    def grpc_management_target(self) -> str:
        return f"127.0.0.1:{self.ports['grpc_management']}"

    @property
    def keys(self) -> dict[str, str]:
        return read_keys(self.workdir)

    def client_settings(self, **kw):
        """The project's client settings (clients/settings.py) pointed at this server."""
        from clients.settings import ClientSettings

        return ClientSettings(
            inference_url=self.inference_url,
            management_url=self.management_url,
            grpc_target=self.grpc_target,
            grpc_management_target=self.grpc_management_target,
            key_file=self.workdir / "key_file.json",
            **kw,
        )

    def auth(self, kind: str = "inference") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[kind]}"}

    def config_text(self) -> str:
        base = (ROOT / "config.properties").read_text()
        self.ports = {
            k: free_port()
            for k in ("inference", "management", "metrics", "grpc_inference", "grpc_management")
        }
        settings = {
            "inference_address": self.inference_url,
            "management_address": self.management_url,
            "metrics_address": self.metrics_url,
            "grpc_inference_port": str(self.ports["grpc_inference"]),
            "grpc_management_port": str(self.ports["grpc_management"]),
            "model_store": str(self.store),
            "load_models": ",".join(f"{m}.mar" for m in self.models),
            "metrics_config": str(ROOT / "metrics.yaml"),
            # Workers talk to the frontend on sockets named after this port: servers that run side
            # by side (parallel test runs, the two-replica tests) must not share it.
            "initial_worker_port": str(random.randrange(20_000, 60_000, 100)),
        }
        return render_properties(base, settings | self.overrides)

    def start(self, timeout: float = 300, wait: bool = True) -> TorchServe:
        self.workdir.mkdir(parents=True, exist_ok=True)
        tmp = self.workdir / "tmp"
        tmp.mkdir(exist_ok=True)
        java_tmpdir(self.workdir).mkdir(exist_ok=True)
        cfg = self.workdir / "config.properties"
        cfg.write_text(self.config_text())
        # Without the caller's PYTHONPATH (`make test` exports the checkout): TorchServe puts it
        # before the unpacked archive, and a worker must run the archive's code, as in the pod.
        env = (
            {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            | {
                "TMPDIR": str(tmp),
                "TEMP": str(java_tmpdir(self.workdir)),
                "LOG_LOCATION": str(self.workdir / "logs"),
                "METRICS_LOCATION": str(self.workdir / "logs"),
                # In an activated venv TS_CONFIG_FILE names the checkout's config.properties, and
                # TorchServe 0.12 prefers it to --ts-config: point it at this server's file.
                "TS_CONFIG_FILE": str(cfg),
            }
            | self.env
        )
        self.log = open(self.workdir / "stdout.log", "wb")  # noqa: SIM115 - lives as long as the server
        self.process = subprocess.Popen(
            [str(TORCHSERVE), "--start", "--foreground", "--ncs", "--ts-config", str(cfg)],
            cwd=self.workdir,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # one process group: the wrapper, Java and its Python workers
        )
        if wait:
            try:
                self.wait_ready(self.models, timeout)
            except BaseException:
                self.stop()
                raise
        return self

    def wait_ready(self, models: list[str], timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while not (self.workdir / "key_file.json").exists():
            if self.process.poll() is not None:
                raise RuntimeError(f"TorchServe exited early:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"TorchServe wrote no key file:\n{self.tail()}")
            time.sleep(0.2)
        try:
            wait_ready(
                self.management_url, self.workdir, models, max(1.0, deadline - time.monotonic())
            )
        except TimeoutError as e:
            raise TimeoutError(f"{e}\n{self.tail()}") from None

    def tail(self, n: int = 60) -> str:
        lines = []
        for name in ("stdout.log", "logs/ts_log.log", "logs/model_log.log"):
            p = self.workdir / name
            if p.exists():
                lines += [f"--- {name}"] + p.read_text(errors="replace").splitlines()[-n:]
        return "\n".join(lines)

    def logs(self, name: str = "model_log.log") -> str:
        p = self.workdir / "logs" / name
        return p.read_text(errors="replace") if p.exists() else ""

    def stop(self) -> None:
        """SIGTERM to the wrapper leaves Java running, so signal the whole process group."""
        if self.process is None:
            return
        pgid = self.process.pid
        for sig, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
            if _group_gone(self.process, pgid, 0):
                break
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, sig)
            if _group_gone(self.process, pgid, grace):
                break
        self.process = None
        self.log.close()
        shutil.rmtree(java_tmpdir(self.workdir), ignore_errors=True)

    def post(self, path: str, key: str = "inference", **kw) -> requests.Response:
        kw.setdefault("timeout", 60)
        return requests.post(
            f"{self.inference_url}{path}", headers=self.auth(key) | kw.pop("headers", {}), **kw
        )


def start_torchserve(tmp: Path, archives: dict[str, Path], **kw) -> TorchServe:
    """Copy `archives` ({model name: .mar path}) into a fresh store under tmp and serve them."""
    store = tmp / "store"
    store.mkdir(parents=True, exist_ok=True)
    for name, mar in archives.items():
        shutil.copy2(mar, store / f"{name}.mar")
    return TorchServe(workdir=tmp / "server", store=store, models=list(archives), **kw).start()


def _group_gone(process: subprocess.Popen, pgid: int, grace: float) -> bool:
    deadline = time.monotonic() + grace
    while True:
        process.poll()  # reap the wrapper so it does not keep the group alive as a zombie
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def job_queue_size(model: str) -> int:
    """The model-config's jobQueueSize: the requests TorchServe holds for the model while its worker
    is busy; past it TorchServe sheds with 503."""
    import yaml

    from tools import registry

    return int(yaml.safe_load(registry.get(model).model_config.read_text())["jobQueueSize"])


def among_neighbours(good, bad: list, queue: int, edge: int = 2) -> list[list]:
    """The bad cases among good neighbours, in waves TorchServe's queue holds whole: each wave is
    `edge` good, at most `queue - 2 * edge` bad, `edge` good. Sent at once, more than the queue
    holds is shed with 503 whenever the worker is still busy with the batch before (a slow or
    shared CPU), which is not what a test of one bad request among good ones asks."""
    step = queue - 2 * edge
    return [[good] * edge + bad[i : i + step] + [good] * edge for i in range(0, len(bad), step)]


def send_waves(send, waves: list[list]) -> list:
    """Each wave's requests sent at once (so TorchServe batches them together), one wave after
    another; the responses in the order of the waves' items."""
    from concurrent.futures import ThreadPoolExecutor

    responses = []
    for wave in waves:
        with ThreadPoolExecutor(len(wave)) as pool:
            responses += list(pool.map(send, wave))
    return responses
