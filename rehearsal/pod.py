"""One replica started the way the pod starts it, on free loopback ports.

The `torchserve` container's docker/entrypoint.sh (config from the rendered ConfigMap, one file per
key as the volume mounts it) and the `proxy` container's docker/proxy.sh (HAProxy), each in its own
process group; readiness is docker/probe.py, as the kubelet runs it. Used by the proxy tests and by
`make rehearse`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from deploy.ts_files import java_tmpdir
from tools.registry import MODELS

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A loopback TCP port nothing listens on now, and never one this process handed out before.
    The server it is for binds it seconds later, and until then the kernel may offer the same
    free port again: a pod's TorchServe and its HAProxy were once given the same one, and
    TorchServe, the slower to bind, exited with "Address already in use"."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def pod_config(overlay: str = "cpu") -> dict[str, str]:
    """The torchserve-config ConfigMap's data, as `kubectl kustomize` renders it for the overlay."""
    from deploy.k8s_check import render

    (cm,) = [
        o
        for o in render(overlay).objects
        if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("torchserve-config")
    ]
    return cm["data"]


@dataclass
class Pod:
    root: Path
    archives: dict[str, Path]
    """{model name: .mar}: what the init containers would have pulled into model_store."""
    tokens: list[str]
    config: dict[str, str]
    """The ConfigMap's data (pod_config()); ports and load_models are set here."""
    proxy_env: dict[str, str] = field(default_factory=dict)
    """PROXY_* overrides (docker/haproxy.cfg names them), e.g. short timeouts for tests."""
    state_key: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    """The Secret torchserve-stream-state-key: replicas of one Service get the same (each its
    own copy of the file, as each pod mounts it), or a stream's chunks fail on the other one."""
    runtime: str = "torchserve"
    """The pod's RUNTIME (docker/entrypoint.sh, proxy.sh, probe.py): torchserve, or oip (the Open
    Inference Protocol server from the checkout's .venv-oip, behind the same door)."""
    ports: dict[str, int] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.ports['proxy_http']}"

    @property
    def grpc(self) -> str:
        return f"127.0.0.1:{self.ports['proxy_grpc']}"

    @property
    def inference(self) -> str:
        return f"http://127.0.0.1:{self.ports['inference']}"

    @property
    def management(self) -> str:
        return f"http://127.0.0.1:{self.ports['management']}"

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def token_file(self) -> Path:
        return self.root / "secret" / "tokens"

    @property
    def state_key_file(self) -> Path:
        return self.root / "secret" / "stream-state-key"

    @property
    def java_tmp(self) -> Path:
        """This pod's TorchServe java.io.tmpdir (`java_tmpdir`): pods count worker ports from
        9000 as `make serve` does, so `make rehearse`'s two replicas, or a pod beside `make
        serve`, would otherwise share /tmp's worker sockets."""
        return java_tmpdir(self.root)

    def _env(self) -> dict[str, str]:
        # A pod's containers start with the image's environment, not the caller's shell: an
        # activated venv's TS_CONFIG_FILE (the checkout's config.properties) is not the pod's.
        # Nor its RUNTIME (`make rollout RUNTIME=oip` exports it): the pod's own is set here.
        inherited = {k: v for k, v in os.environ.items() if k != "TS_CONFIG_FILE"}
        inherited["RUNTIME"] = self.runtime
        if self.runtime != "torchserve":
            inherited |= {"PYTHONPATH": str(ROOT)}
            inherited["OIP_PYTHON"] = str(ROOT / ".venv-oip" / "bin" / "python")
        return inherited | {
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
            "TS_WORKDIR": str(self.work),
            "TS_CONFIG_DIR": str(self.root / "config"),
            "TS_APP_DIR": str(ROOT),
            "TMPDIR": str(self.root / "tmp"),
            "TEMP": str(self.java_tmp),
            "LOG_LOCATION": str(self.work / "logs"),
            "METRICS_LOCATION": str(self.work / "logs"),
        }

    def start_torchserve(self) -> None:
        names = ("inference", "management", "metrics", "grpc", "grpc_mgmt")
        self.ports.update({k: free_port() for k in names if k not in self.ports})
        settings = self.config | {
            "inference_address": self.inference,
            "management_address": self.management,
            "metrics_address": f"http://127.0.0.1:{self.ports['metrics']}",
            "grpc_inference_port": str(self.ports["grpc"]),
            "grpc_management_port": str(self.ports["grpc_mgmt"]),
            "load_models": ",".join(f"{m}.mar" for m in self.archives),
        }
        config = self.root / "config"
        shutil.rmtree(config, ignore_errors=True)
        config.mkdir(parents=True)
        for key, value in settings.items():
            (config / key).write_text(value)
        store = self.work / "model_store"
        store.mkdir(parents=True, exist_ok=True)
        (self.root / "tmp").mkdir(exist_ok=True)
        self.java_tmp.mkdir(exist_ok=True)
        for name, mar in self.archives.items():
            shutil.copy2(mar, store / f"{name}.mar")
        self.state_key_file.parent.mkdir(parents=True, exist_ok=True)
        self.state_key_file.write_text(self.state_key + "\n")
        # Each model that signs state names the variable its key file is given in (its STATE_KEY
        # hook); the pod mounts the one Secret there for all of them.
        keys = {spec.samples().state_key for spec in MODELS} - {None}
        env = self._env() | dict.fromkeys(sorted(keys), str(self.state_key_file))
        env |= {  # RUNTIME=oip: the OIP server where the door finds TorchServe
            "OIP_HTTP_PORT": str(self.ports["inference"]),
            "OIP_GRPC_PORT": str(self.ports["grpc"]),
            "OIP_METRICS_PORT": str(self.ports["metrics"]),
        }
        self._spawn("torchserve", [str(DOCKER / "entrypoint.sh")], env)

    def start_proxy(self) -> None:
        self.ports.update(
            {
                k: free_port()
                for k in ("proxy_http", "proxy_grpc", "proxy_health", "proxy_metrics")
                if k not in self.ports
            }
        )
        self.token_file.parent.mkdir(parents=True, exist_ok=True)
        if not self.token_file.exists():
            self.token_file.write_text("\n".join(self.tokens) + "\n")
        env = self._env() | {
            "PROXY_TOKENS": str(self.token_file),
            "PROXY_RUN_DIR": str(self.root / "proxy"),
            "PROXY_LISTEN": "127.0.0.1",
            "PROXY_HTTP_PORT": str(self.ports["proxy_http"]),
            "PROXY_GRPC_PORT": str(self.ports["proxy_grpc"]),
            "PROXY_HEALTH_PORT": str(self.ports["proxy_health"]),
            "PROXY_METRICS_PORT": str(self.ports["proxy_metrics"]),
            "TS_METRICS": f"127.0.0.1:{self.ports['metrics']}",
            "TS_INFERENCE": f"127.0.0.1:{self.ports['inference']}",
            "TS_GRPC": f"127.0.0.1:{self.ports['grpc']}",
        }
        self._spawn("proxy", [str(DOCKER / "proxy.sh")], env | self.proxy_env)

    def _spawn(self, name: str, cmd: list[str], env: dict[str, str]) -> None:
        log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 - lives as long as the process
        self.procs[name] = subprocess.Popen(
            cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()  # the child holds its own descriptor

    def probe(self, *args: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, str(DOCKER / "probe.py"), *args]
        cmd += ["--inference", self.inference, "--management", self.management]
        cmd += ["--workdir", str(self.work), "--runtime", self.runtime]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30)

    def proxy_probe(self) -> subprocess.CompletedProcess:
        """The proxy container's readiness probe: /ping through HAProxy with the client token, and
        HAProxy's own /ready (both its REST and gRPC paths to TorchServe are up)."""
        cmd = [sys.executable, str(DOCKER / "probe.py"), "live", "--inference", self.http]
        cmd += ["--token-file", str(self.token_file), "--workdir", str(self.work)]
        cmd += ["--require", f"http://127.0.0.1:{self.ports['proxy_health']}/ready"]
        cmd += ["--runtime", self.runtime]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30)

    def wait_ready(self, timeout: float = 180) -> None:
        """Until the startup probe (`probe.py ready`) and the proxy's readiness probe pass."""
        deadline = time.monotonic() + timeout
        for check in (lambda: self.probe("ready"), self.proxy_probe):
            while (out := check()).returncode != 0:
                for name, proc in self.procs.items():
                    if proc.poll() is not None:
                        raise RuntimeError(f"{name} exited {proc.returncode}:\n{self.tail()}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{out.stderr}\n{self.tail()}")
                time.sleep(0.5)

    def start(self, timeout: float = 180) -> Pod:
        self.start_torchserve()
        self.start_proxy()
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.kill()
            raise
        return self

    def drain(self, pre_stop: float) -> None:
        """What the kubelet does to a terminating pod once endpoints drop it: preStop, then SIGTERM
        to both containers (tini forwards it to the entrypoints), and wait for them to exit."""
        time.sleep(pre_stop)
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        for name in list(self.procs):
            self._reap(name, grace=90)
        shutil.rmtree(self.java_tmp, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL to both containers' process groups at once: a node lost, the pod evicted."""
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        for name in list(self.procs):
            self._reap(name, grace=10)
        shutil.rmtree(self.java_tmp, ignore_errors=True)

    def _reap(self, name: str, grace: float) -> None:
        proc = self.procs.pop(name)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:  # Java and workers may outlive the entrypoint briefly
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def tail(self, n: int = 40) -> str:
        lines = []
        for p in (
            self.root / "torchserve.log",
            self.root / "proxy.log",
            self.work / "logs/ts_log.log",
        ):
            if p.exists():
                lines += [f"--- {p.name}"] + p.read_text(errors="replace").splitlines()[-n:]
        return "\n".join(lines)
