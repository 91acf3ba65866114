"""Floods at the pod's door (docker/haproxy.cfg in front of TorchServe, the pod's way), measured.

    python -m reliability.flood [--model M | --archive model_store/M.mar] [--proxy-config FILE] [--out reports]

Each case opens the attack from other loopback addresses (127.0.0.2 and up: other sources to the
proxy), then sends authenticated requests from 127.0.0.1 (REST predictions and gRPC Ping) and
reports what they got and how long they took (the model: --model, or the --archive's name, or the
first registered; its requests are its samples.py EXAMPLE):
- `idle-N`: N TCP connections that never send a byte (no token);
- `slow-bodies-N`: N authenticated uploads that send 40 kB of a 200 kB body, then a byte a second.
Run it with an older `--proxy-config` (e.g. `git show REV:docker/haproxy.cfg > old.cfg`) to compare;
docs/reliability.md has both. Writes reports/flood.{md,json}.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import secrets
import socket
import statistics
import tempfile
import time
from pathlib import Path

import grpc
import requests
from google.protobuf import empty_pb2

from clients import stubs
from rehearsal.pod import Pod, pod_config
from tools.registry import get, names

ROOT = Path(__file__).resolve().parents[1]
PER_SOURCE = 1000
"""Connections one attacking address opens at most (the proxy's default per-source cap)."""


def connect(port: int, source: str = "127.0.0.1", timeout: float = 10) -> socket.socket:
    return socket.create_connection(
        ("127.0.0.1", port), timeout=timeout, source_address=(source, 0)
    )


def open_idle(port: int, count: int, first_source: int = 2) -> list[socket.socket]:
    """`count` silent connections, at most PER_SOURCE from each of 127.0.0.<first_source>, ...;
    those refused at once are not returned."""
    sockets = []
    for i in range(count):
        with contextlib.suppress(OSError):
            sockets.append(connect(port, f"127.0.0.{first_source + i // PER_SOURCE}", timeout=2))
    return sockets


def closed_at_once(sockets: list[socket.socket]) -> int:
    """How many of `sockets` the other side has closed (or reset) already, after whatever it sent
    first (a 408, say)."""
    closed = 0
    for s in sockets:
        s.settimeout(0.01)
        try:
            while s.recv(65536):
                pass
            closed += 1
        except TimeoutError:
            pass
        except OSError:
            closed += 1
    return closed


def slow_upload(port: int, token: str, path: str, source: str = "127.0.0.1") -> socket.socket:
    """An authenticated request that sends 40 kB of a 200 kB body and then nothing more."""
    s = connect(port, source)
    head = f"POST {path} HTTP/1.1\r\nHost: pod\r\nAuthorization: Bearer {token}\r\n"
    s.sendall((head + "Content-Length: 200000\r\n\r\n").encode() + b"x" * 40000)
    return s


def victims(pod: Pod, token: str, model: str, count: int = 20) -> dict:
    """Authenticated REST predictions (and one gRPC Ping) from 127.0.0.1, one after another."""
    statuses, latencies = [], []
    for _ in range(count):
        start = time.monotonic()
        try:
            r = requests.post(
                f"{pod.http}/predictions/{model}",
                json=get(model).example(),
                headers={"Authorization": f"Bearer {token}"},
                timeout=10,
            )
            statuses.append(r.status_code)
        except requests.RequestException as e:
            statuses.append(type(e).__name__)
        latencies.append(time.monotonic() - start)
    _, pb_grpc, _, _ = stubs.load()
    with grpc.insecure_channel(pod.grpc) as channel:
        try:
            stub = pb_grpc.InferenceAPIsServiceStub(channel)
            md = [("authorization", f"Bearer {token}")]
            stub.Ping(empty_pb2.Empty(), metadata=md, timeout=10)
            grpc_ping = "OK"
        except grpc.RpcError as e:
            grpc_ping = e.code().name
    return {
        "ok": sum(s == 200 for s in statuses),
        "requests": count,
        "statuses": {str(k): statuses.count(k) for k in sorted(set(statuses), key=str)},
        "p50_ms": round(statistics.median(latencies) * 1000),
        "max_ms": round(max(latencies) * 1000),
        "grpc_ping": grpc_ping,
    }


def run_cases(pod: Pod, token: str, idle_counts: list[int], slow: int, model: str) -> list[dict]:
    rows = []
    for n in idle_counts:
        idle = open_idle(pod.ports["proxy_http"], n)
        try:
            rows.append({"case": f"idle-{n}", "opened": len(idle), **victims(pod, token, model)})
        finally:
            for s in idle:
                s.close()
        time.sleep(1)
    uploads = []
    try:
        for _ in range(slow):
            with contextlib.suppress(OSError):
                uploads.append(slow_upload(pod.ports["proxy_http"], token, f"/predictions/{model}"))
        rows.append(
            {"case": f"slow-bodies-{slow}", "opened": len(uploads), **victims(pod, token, model)}
        )
    finally:
        for s in uploads:
            s.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", choices=names(), help="default: the --archive's name, else the first")
    p.add_argument("--archive", type=Path, help="default: model_store/<model>.mar")
    p.add_argument("--proxy-config", type=Path, default=ROOT / "docker" / "haproxy.cfg")
    p.add_argument("--idle", default="520,1030,3000", help="silent connections per case")
    p.add_argument("--slow", type=int, default=100, help="slow uploads")
    p.add_argument("--out", type=Path, default=ROOT / "reports")
    p.add_argument(
        "--proxy-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a PROXY_* setting for the proxy (e.g. an older config's own defaults)",
    )
    args = p.parse_args(argv)
    model = args.model or (args.archive.stem if args.archive else names()[0])
    archive = args.archive or ROOT / "model_store" / f"{model}.mar"
    extra = dict(item.split("=", 1) for item in args.proxy_env)
    token = secrets.token_urlsafe(16)
    with tempfile.TemporaryDirectory(prefix="flood-") as tmp:
        pod = Pod(
            Path(tmp),
            {model: archive},
            [token],
            pod_config("cpu"),
            proxy_env={"PROXY_CONFIG": str(args.proxy_config.resolve())} | extra,
        ).start()
        try:
            rows = run_cases(pod, token, [int(n) for n in args.idle.split(",")], args.slow, model)
        finally:
            pod.drain(pre_stop=0)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "flood.json").write_text(
        json.dumps({"config": str(args.proxy_config), "rows": rows}, indent=2)
    )
    lines = [
        f"# Floods at the pod proxy ({args.proxy_config} {extra or ''})",
        "",
        "| case | attack sockets open | authenticated REST 200 | other answers | p50 ms | max ms | gRPC Ping |",
        "|---|---:|---:|---|---:|---:|---|",
    ]
    lines += [
        f"| {r['case']} | {r['opened']} | {r['ok']}/{r['requests']} | {r['statuses']} | {r['p50_ms']} | {r['max_ms']} | {r['grpc_ping']} |"
        for r in rows
    ]
    (args.out / "flood.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
