"""The pod's door in front of a local TorchServe (`make serve`), so that outside a pod too every
refusal carries the JSON error body and a request id.

Bare TorchServe answers a body over `max_request_size` with a 413 and an empty body (its Java
frontend refuses it before any handler runs), and its own errors in its own shape. `make serve`
therefore runs TorchServe on loopback ports of its own (`torchserve-config`) and the same HAProxy
door as a pod (docker/proxy.sh, docker/haproxy.cfg) on the addresses config.properties names, so
clients, docs and tools keep talking to 127.0.0.1:8080 (REST) and :7070 (gRPC). TorchServe keeps
checking its own tokens (key_file.json); the door passes them on (PROXY_TORCHSERVE_AUTH).
Management (8081) and metrics (8082) stay TorchServe's own.

    python -m deploy.local_door torchserve-config --config config.properties --out logs/torchserve.properties
    python -m deploy.local_door start --config config.properties --run logs/door
    python -m deploy.local_door ready
    python -m deploy.local_door stop --run logs/door
    python -m deploy.local_door forget   # after `torchserve --stop`: its unpacked archives

A door started before TorchServe listens marks it down; `ready` waits until the door's own health
endpoint says both paths (REST and gRPC) pass their checks again, so `make serve` returns only when
a request through the door reaches TorchServe.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

from deploy.ts_files import java_tmpdir, parse_properties, read_properties, render_properties

ROOT = Path(__file__).resolve().parents[1]
PROXY = ROOT / "docker" / "proxy.sh"
BEHIND_HTTP_PORT = int(os.environ.get("LOCAL_TS_HTTP_PORT", "8090"))
"""TorchServe's REST inference port behind the local door (LOCAL_TS_HTTP_PORT)."""
BEHIND_GRPC_PORT = int(os.environ.get("LOCAL_TS_GRPC_PORT", "7090"))
"""TorchServe's gRPC inference port behind the local door (LOCAL_TS_GRPC_PORT)."""
HEALTH_PORT = 8086
"""The local door's own readiness endpoint (loopback): 200 while REST and gRPC pass their checks."""


def public(props: dict[str, str]) -> tuple[str, int, int]:
    """(host, REST port, gRPC port) that config.properties names for inference: the door's."""
    url = urlsplit(props.get("inference_address", "http://127.0.0.1:8080"))
    return (
        url.hostname or "127.0.0.1",
        url.port or 8080,
        int(props.get("grpc_inference_port", 7070)),
    )


def torchserve_config(
    base: str,
    http_port: int = BEHIND_HTTP_PORT,
    grpc_port: int = BEHIND_GRPC_PORT,
    java_tmp: Path | None = None,
) -> str:
    """config.properties with TorchServe's inference listeners moved behind the door (loopback)
    and its java.io.tmpdir in `java_tmp` (`vmargs`, read after the wrapper's TEMP), a folder of
    this checkout's own that `forget` removes once TorchServe has stopped: the frontend unpacks
    every archive there and never removes it, and names its worker sockets there."""
    settings = {
        "inference_address": f"http://127.0.0.1:{http_port}",
        "grpc_inference_address": "127.0.0.1",
        "grpc_inference_port": str(grpc_port),
    }
    if java_tmp is not None:
        vmargs = parse_properties(base).get("vmargs", "")
        settings["vmargs"] = f"{vmargs} -Djava.io.tmpdir={java_tmp}".strip()
    return render_properties(base, settings)


def door_env(
    props: dict[str, str],
    run_dir: Path,
    torchserve_http: str,
    torchserve_grpc: str,
    listen: tuple[str, int, int] | None = None,
    **extra: str,
) -> dict[str, str]:
    """proxy.sh's environment for a door on `listen` (default: config.properties' inference
    addresses) in front of TorchServe at `torchserve_http` / `torchserve_grpc` (host:port)."""
    host, http_port, grpc_port = listen or public(props)
    metrics = urlsplit(props.get("metrics_address", "http://127.0.0.1:8082"))
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PROXY_", "TS_", "MAX_REQUEST"))
    }
    return (
        env
        | {
            "PROXY_TORCHSERVE_AUTH": "1",
            "PROXY_RUN_DIR": str(run_dir),
            "PROXY_LISTEN": host,
            "PROXY_HTTP_PORT": str(http_port),
            "PROXY_GRPC_PORT": str(grpc_port),
            "PROXY_METRICS_PORT": extra.pop("PROXY_METRICS_PORT", "8087"),
            "PROXY_HEALTH_PORT": extra.pop("PROXY_HEALTH_PORT", str(HEALTH_PORT)),
            "TS_INFERENCE": torchserve_http,
            "TS_GRPC": torchserve_grpc,
            "TS_METRICS": f"{metrics.hostname or '127.0.0.1'}:{metrics.port or 8082}",
            "MAX_REQUEST_SIZE": props.get("max_request_size", "6553500"),
        }
        | extra
    )


def start(env: dict[str, str], run_dir: Path, wait_s: float = 15) -> subprocess.Popen:
    """Start the door (docker/proxy.sh) in its own process group; its pid goes to run_dir/pid, its
    output to run_dir/door.log. Returns once its REST port accepts connections."""
    run_dir.mkdir(parents=True, exist_ok=True)
    address = (env["PROXY_LISTEN"], int(env["PROXY_HTTP_PORT"]))
    with contextlib.suppress(OSError), socket.create_connection(address, timeout=1):
        raise RuntimeError(f"the door exited: {address[0]}:{address[1]} is taken by another server")
    with open(run_dir / "door.log", "ab") as log:
        proc = subprocess.Popen(
            [str(PROXY)], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    (run_dir / "pid").write_text(str(proc.pid))
    deadline = time.monotonic() + wait_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the door exited ({proc.returncode}): see {run_dir / 'door.log'}")
        with contextlib.suppress(OSError), socket.create_connection(address, timeout=1):
            return proc
        if time.monotonic() > deadline:
            stop(run_dir)
            raise RuntimeError(f"the door did not listen on {address}: see {run_dir / 'door.log'}")
        time.sleep(0.2)


def wait_ready(health_port: int, wait_s: float = 60) -> None:
    """Return once the door's /ready answers 200 (REST and gRPC backends up); TimeoutError after
    wait_s."""
    url = f"http://127.0.0.1:{health_port}/ready"
    deadline = time.monotonic() + wait_s
    last = "no answer"
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
                last = f"HTTP {answer.status}"
        except urllib.error.HTTPError as e:
            last = f"HTTP {e.code}"
        except OSError as e:
            last = str(e)
        if time.monotonic() > deadline:
            raise TimeoutError(f"the door's {url} did not say ready within {wait_s:.0f} s ({last})")
        time.sleep(0.2)


def stop(run_dir: Path, wait_s: float = 15) -> bool:
    """Stop the door started in `run_dir` (soft stop, then kill); False when none ran."""
    pid_file = run_dir / "pid"
    if not pid_file.is_file():
        return False
    pid = int(pid_file.read_text())
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        pid_file.unlink()
        return False
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            break
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.2)
    else:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    pid_file.unlink()
    return True


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    cfg = sub.add_parser("torchserve-config", help="write TorchServe's config, behind the door")
    cfg.add_argument("--config", type=Path, default=ROOT / "config.properties")
    cfg.add_argument("--out", type=Path, required=True)
    go = sub.add_parser("start", help="start the door in front of it")
    go.add_argument("--config", type=Path, default=ROOT / "config.properties")
    go.add_argument("--run", type=Path, default=Path("logs/door"))
    ready = sub.add_parser("ready", help="wait until the door reaches TorchServe on both paths")
    ready.add_argument("--timeout", type=float, default=60)
    end = sub.add_parser("stop", help="stop the door")
    end.add_argument("--run", type=Path, default=Path("logs/door"))
    sub.add_parser(
        "forget", help="remove a stopped TorchServe's java.io.tmpdir (unpacked archives)"
    )
    args = p.parse_args(argv)
    if args.command == "torchserve-config":
        args.out.parent.mkdir(parents=True, exist_ok=True)
        java_tmp = java_tmpdir(ROOT)
        java_tmp.mkdir(exist_ok=True)
        args.out.write_text(torchserve_config(args.config.read_text(), java_tmp=java_tmp))
        return 0
    if args.command == "forget":
        shutil.rmtree(java_tmpdir(ROOT), ignore_errors=True)
        return 0
    if args.command == "start":
        stop(args.run)
        props = read_properties(args.config)
        env = door_env(
            props, args.run, f"127.0.0.1:{BEHIND_HTTP_PORT}", f"127.0.0.1:{BEHIND_GRPC_PORT}"
        )
        try:
            start(env, args.run)
        except RuntimeError as e:
            print(f"door: {e}", file=sys.stderr)
            return 1
        host, http_port, grpc_port = public(props)
        print(f"door: http://{host}:{http_port} and {host}:{grpc_port} (gRPC) -> TorchServe")
        return 0
    if args.command == "ready":
        try:
            wait_ready(HEALTH_PORT, args.timeout)
        except TimeoutError as e:
            print(f"door: {e}", file=sys.stderr)
            return 1
        return 0
    stop(args.run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
