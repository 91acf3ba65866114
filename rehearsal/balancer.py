"""The rehearsal's load balancer: HAProxy (rehearsal/balancer.cfg) over the replicas' pod proxies,
steered through its runtime API the way the endpoints controller steers a Service."""

from __future__ import annotations

import csv
import hashlib
import io
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from deploy.ts_files import AF_UNIX_PATH_MAX
from rehearsal.pod import Pod, free_port

CONFIG = Path(__file__).with_name("balancer.cfg")
BACKENDS = ("replicas_rest", "replicas_grpc")


@dataclass
class Balancer:
    root: Path
    pods: dict[str, Pod]
    """{"a": pod, "b": pod}: the server names in balancer.cfg."""
    token: str
    rollout: bool = False
    """`make rollout`'s door (balancer.cfg, LB_ROLLOUT): dropped or failed predictions retried,
    the candidate out for good at its first failed or timed-out answer, the stable replica as a
    backup ("standby") when no weighted server is up, frequency streams sticky to a version."""
    try_timeout_s: float = 10.0
    """With `rollout`: how long one try may wait for a replica's answer before it is retried on
    another server."""
    runtime: str = "torchserve"
    """What the replicas serve (the pods' RUNTIME): the health check is TorchServe's /ping, or
    the Open Inference Protocol server's readiness route /v2/health/ready."""
    ports: dict[str, int] = field(default_factory=dict)
    proc: subprocess.Popen | None = None

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.ports['http']}"

    @property
    def grpc(self) -> str:
        return f"127.0.0.1:{self.ports['grpc']}"

    @property
    def socket_path(self) -> Path:
        """The runtime API's socket: in `root`, or where `root` is too deep for it, a short path
        under /tmp named by `root`. HAProxy binds `<path>.<pid>.tmp` first and renames it, so
        that name must fit AF_UNIX's 107 bytes."""
        path = self.root / "lb.sock"
        if len(str(path).encode()) + len(".4194304.tmp") <= AF_UNIX_PATH_MAX:
            return path
        digest = hashlib.sha256(str(self.root.resolve()).encode()).hexdigest()[:12]
        return Path("/tmp") / f"lb-{digest}.sock"

    def start(self) -> Balancer:
        self.root.mkdir(parents=True, exist_ok=True)
        self.ports = {"http": free_port(), "grpc": free_port()}
        env = os.environ | {
            "LB_SOCKET": str(self.socket_path),
            "LB_HTTP_PORT": str(self.ports["http"]),
            "LB_GRPC_PORT": str(self.ports["grpc"]),
            "LB_TOKEN": self.token,
            "LB_HEALTH_URI": "/v2/health/ready" if self.runtime == "oip" else "/ping",
        }
        if self.rollout:
            env |= {"LB_ROLLOUT": "1", "LB_TRY_TIMEOUT": f"{int(self.try_timeout_s * 1000)}ms"}
        for name, pod in self.pods.items():
            key = f"REPLICA_{name.upper()}"
            env |= {
                f"{key}_HTTP": f"127.0.0.1:{pod.ports['proxy_http']}",
                f"{key}_HTTP_PORT": str(pod.ports["proxy_http"]),
                f"{key}_GRPC": pod.grpc,
            }
        with open(self.root / "lb.log", "ab") as log:
            self.proc = subprocess.Popen(
                ["haproxy", "-db", "-f", str(CONFIG)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        for name in self.pods:
            self.wait_state(name, "UP")
        return self

    def command(self, line: str) -> str:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(str(self.socket_path))
                    s.sendall(line.encode() + b"\n")
                    out = b""
                    while chunk := s.recv(65536):
                        out += chunk
                    return out.decode()
            except (FileNotFoundError, ConnectionRefusedError):
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise
                time.sleep(0.1)

    def stats(self) -> list[dict[str, str]]:
        text = self.command("show stat").lstrip("# ")
        return list(csv.DictReader(io.StringIO(text)))

    def servers(self, name: str) -> list[dict[str, str]]:
        return [r for r in self.stats() if r["pxname"] in BACKENDS and r["svname"] == name]

    def set_state(self, name: str, state: str) -> None:
        """ "maint": out of the rotation (pod terminating); "ready": back in (readiness passed)."""
        for backend in BACKENDS:
            self.command(f"set server {backend}/{name} state {state}")

    def set_health(self, name: str, health: str) -> None:
        """Force a replica's health ("down": out of the rotation as if its checks had failed,
        counted as a check-down; its checks then bring it back after `rise` passes)."""
        for backend in BACKENDS:
            self.command(f"set server {backend}/{name} health {health}")

    def set_weight(self, name: str, weight: int) -> None:
        """A replica's share of new requests (0-256, relative to the others'): 0 sends it none."""
        for backend in BACKENDS:
            self.command(f"set server {backend}/{name} weight {weight}")

    def wait_state(self, name: str, prefix: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not all(r["status"].startswith(prefix) for r in self.servers(name)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"replica {name} never {prefix}: {self.servers(name)}")
            time.sleep(0.2)

    def in_flight(self, name: str) -> int:
        """Requests the balancer has open on a replica right now (REST + gRPC)."""
        return sum(int(r["scur"] or 0) for r in self.servers(name))

    def served(self) -> dict[str, int]:
        """Requests each replica answered in total (REST + gRPC)."""
        out: dict[str, int] = {}
        for r in self.stats():
            if r["pxname"] in BACKENDS and r["svname"] in self.pods:
                out[r["svname"]] = out.get(r["svname"], 0) + int(r["stot"] or 0)
        return out

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=10)
        self.socket_path.unlink(missing_ok=True)
