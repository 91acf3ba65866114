"""Live-traffic mirroring for a rollout's judgement: nginx (its `mirror` module) in front of the
door hands every REST prediction to the door as it came and a copy of it to a recorder, which keeps
the newest copies for the judge, so a candidate is judged on what clients really send.

    python -m deploy.mirror record [--host 0.0.0.0] [--port 8097] [--keep 2000] [--keep-mib 256]
        [--token-file TOKENS]
    python -m deploy.mirror nginx-config     # a serving pod's nginx config (k8s_config), on stdout

A request carrying the header X-Rollout-Judge (the judge's own, deploy/rollout.py) is passed on
and not copied. The recorder answers every POST with 204 at once and keeps its path, content type and body (never
its headers: no client token is kept), with --token-file only where the request carried one of
the client tokens (nginx passes the client's Authorization header on with the copy), so what no
client sent, or a request the door refuses for its token, is no evidence; `GET /copies?model=M&route=R&n=N` hands out, as JSON lines
({"path", "content_type", "at", "body": base64}), the newest N copies of model M's predictions
(route `predictions`, TorchServe's /predictions/M; `infer`, the Open Inference Protocol's
/v2/models/M/infer) not handed out before, oldest of them first; `GET /healthz` answers how many
are kept and how many were handed out ({"copies", "taken"}). It
keeps at most `keep` copies and `keep-mib` MiB of bodies, the oldest going first.

HAProxy 2.6, the door, has no mirroring; nginx's `mirror` does it for HTTP/1.1 bodies, not for
gRPC: gRPC clients' models are judged through the REST copies of the same model's requests. The
client's answer is the door's, whatever the copy meets: nginx gives a copy 200 ms to connect and
1 s to be answered before it drops it (a copy that is slow holds back the next request on the same
client connection, never the answer to this one). The same config text serves `make rollout`
(rehearsal/mirror.py) and the Kubernetes pods (`k8s_config`, the rollout component's nginx.conf).
"""

from __future__ import annotations

import argparse
import base64
import collections
import contextlib
import hashlib
import json
import re
import signal
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from handlers.kits.signal.codec import STATE_HEADER

PREDICTIONS = r"^/(predictions/[^/]+|v2/models/[^/]+(/versions/[^/]+)?/infer)$"
"""The routes copied: predictions (TorchServe) and inference (the Open Inference Protocol)."""
_ROUTES = {
    "predictions": re.compile(r"^/predictions/(?P<model>[^/?]+)$"),
    "infer": re.compile(r"^/v2/models/(?P<model>[^/?]+)(/versions/[^/?]+)?/infer$"),
}
JUDGE_HEADER = "X-Rollout-Judge"
"""Marks the judge's own requests, which the mirror does not copy (nginx reads it as
$http_x_rollout_judge)."""
PORT = 8097
"""The recorder's port (the rollout component's rollout-recorder Service)."""

CONFIG = """\
daemon off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {error_log} warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    # Bodies the door takes are mirrored from memory: its limit in one buffer.
    client_max_body_size {max_body};
    client_body_buffer_size {body_buffer};
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_buffering off;
    proxy_read_timeout 300s;
    upstream door {{ server {door}; keepalive 32; }}
    upstream recorder {{ server {recorder}; keepalive 8; }}
    server {{
        listen {listen};
        location ~ "{predictions}" {{
            mirror /_mirror;
            mirror_request_body on;
            proxy_pass http://door;
        }}
        location / {{ proxy_pass http://door; }}
        location = /_mirror {{
            internal;
            # The judge's own requests (deploy/rollout.py sends this header) are not copied.
            if ($http_x_rollout_judge) {{ return 204; }}
            # With the client's Authorization header: a recorder given the tokens keeps only
            # copies of requests with one of them (and never the header itself).
            proxy_pass http://recorder$request_uri;
            proxy_connect_timeout 200ms;
            proxy_send_timeout 1s;
            proxy_read_timeout 1s;
        }}
    }}
}}
"""


def nginx_config(
    *,
    root: str,
    listen: str,
    door: str,
    recorder: str,
    max_body: str = "8m",
    body_buffer: str | None = None,
    error_log: str | None = None,
) -> str:
    """The mirror's nginx config: `listen` in front of `door` (host:port), copies to `recorder`
    (host:port); pid and temp files under `root` (writable)."""
    return CONFIG.format(
        root=root,
        listen=listen,
        door=door,
        recorder=recorder,
        predictions=PREDICTIONS,
        max_body=max_body,
        body_buffer=body_buffer or max_body,
        error_log=error_log or f"{root}/error.log",
    )


K8S_LISTEN = 8088
"""The mirror's port in a serving pod (container port `mirror`; the client Service's target)."""


def k8s_config() -> str:
    """k8s/components/rollout/nginx.conf: in front of the pod's door (HAProxy on 8085), copies to
    the rollout-recorder Service. Bodies up to the door's limit (config.properties'
    max_request_size, 1 MiB) are held in memory; larger ones, up to 8 MiB, reach the door through
    a temporary file and get its refusal, as without the mirror."""
    return nginx_config(
        root="/tmp/nginx",
        listen=str(K8S_LISTEN),
        door="127.0.0.1:8085",
        recorder=f"rollout-recorder:{PORT}",
        max_body="8m",
        body_buffer="1m",
        error_log="stderr",
    )


@dataclass(frozen=True)
class Copy:
    """One client request as it reached the door: its path, content type, body and the headers
    that carry its parameters (`kept_headers`)."""

    path: str
    content_type: str
    body: bytes
    at: float
    headers: tuple[tuple[str, str], ...] = ()

    def route(self) -> tuple[str, str] | None:
        """(route, model) of a prediction's path, else None."""
        path = urlsplit(self.path).path
        for route, pattern in _ROUTES.items():
            match = pattern.match(path)
            if match:
                return route, match["model"]
        return None

    def line(self) -> str:
        body = base64.b64encode(self.body).decode()
        fields = {"path": self.path, "content_type": self.content_type, "at": self.at}
        return json.dumps(fields | {"headers": dict(self.headers), "body": body})

    @classmethod
    def from_line(cls, line: str) -> Copy:
        d = json.loads(line)
        headers = tuple(d.get("headers", {}).items())
        return cls(d["path"], d["content_type"], base64.b64decode(d["body"]), d["at"], headers)


def kept_headers(headers: Any) -> tuple[tuple[str, str], ...]:
    """The request headers a copy keeps: its parameters (`X-...`: a float32 signal's sample rate,
    frequencies, band, stream), never its credentials or the hops' own (`X-Request-ID`,
    `X-Forwarded-*`, `X-Real-IP`, the judge's mark)."""
    skip = ("x-request-id", "x-forwarded-", "x-real-ip", JUDGE_HEADER.lower())
    return tuple(
        (k, v)
        for k, v in headers.items()
        if k.lower().startswith("x-") and not k.lower().startswith(skip)
    )


@dataclass(frozen=True)
class Raw:
    """A copied request whose body is not JSON (a float32 signal, an image, a text), to be sent
    again as it came: its content type, body and parameter headers."""

    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


JSON_TYPES = ("", "application/json")
"""Content types whose copies are JSON bodies (the judge parses them; one that does not parse is
taken, not sent); any other body is sent again as it came (`Raw`)."""


def replayable(copies: list[Copy], raw: bool = True) -> list[Any]:
    """What the judge sends again of `copies`, in order: each JSON body parsed, any other body as
    a `Raw` (with `raw`: TorchServe's route; the Open Inference Protocol's binary copies are
    taken, not sent). A stream's continuation is taken, not sent: its state names the version
    that answered it, which another version refuses (`stale_state`) by design."""
    bodies: list[Any] = []
    for copy in copies:
        if any(k.lower() == STATE_HEADER.lower() for k, _ in copy.headers):
            continue
        if copy.content_type.split(";")[0].strip().lower() not in JSON_TYPES:
            if raw:
                bodies.append(Raw(copy.content_type, copy.body, copy.headers))
            continue
        try:
            body = json.loads(copy.body)
        except ValueError:
            continue
        if not _continues_a_stream(body):
            bodies.append(body)
    return bodies


def _continues_a_stream(body: Any) -> bool:
    """A signal model's JSON chunk, or its Open Inference Protocol request, with a state."""
    if not isinstance(body, dict):
        return False
    parameters = body.get("parameters")
    return ("signal" in body and "state" in body) or (
        "inputs" in body and isinstance(parameters, dict) and "state" in parameters
    )


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Recorder

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        size = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(size)
        if self.server.tokens.accepts(self.headers.get("Authorization", "")):
            kind, kept = self.headers.get("Content-Type", ""), kept_headers(self.headers)
            copy = Copy(self.path, kind, body, time.time(), kept)
            self.server.add(copy)
        self._answer(204, b"")

    def do_GET(self) -> None:  # noqa: N802
        url = urlsplit(self.path)
        if url.path == "/healthz":
            counts = {"copies": len(self.server.copies), "taken": self.server.taken}
            self._answer(200, json.dumps(counts).encode(), "application/json")
            return
        if url.path != "/copies":
            self._answer(404, b"not found\n", "text/plain")
            return
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            n = int(query.get("n", "100"))
        except ValueError:
            self._answer(400, b"n must be a number\n", "text/plain")
            return
        copies = self.server.take(n, model=query.get("model"), route=query.get("route"))
        self._answer(200, "".join(c.line() + "\n" for c in copies).encode(), "application/jsonl")

    def _answer(self, status: int, body: bytes, content_type: str | None = None) -> None:
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class Tokens:
    """The client tokens a copy's request must carry one of (`Authorization: Bearer <token>`), read
    from `path` (one a line, as the door reads them: docker/proxy.sh) again whenever it changes,
    so a rotated Secret is followed; no path: every copy is kept."""

    def __init__(self, path: Path | None = None):
        self.path = path
        self.stamp: tuple[int, int] | None = None
        self.hashes: frozenset[bytes] = frozenset()

    def accepts(self, authorization: str) -> bool:
        if self.path is None:
            return True
        try:
            stat = self.path.stat()
            if (stat.st_mtime_ns, stat.st_size) != self.stamp:
                lines = self.path.read_text().split("\n")
                tokens = ("".join(x.split()) for x in lines)
                self.hashes = frozenset(_hash(t) for t in tokens if t)
                self.stamp = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            pass  # a Secret being replaced: the last tokens read
        scheme, _, token = authorization.partition(" ")
        return scheme.lower() == "bearer" and _hash(token.strip()) in self.hashes


def _hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class Recorder(ThreadingHTTPServer):
    """The copies' keeper: the newest `keep` copies, at most `keep_bytes` of bodies; with
    `tokens`, only copies of requests that carried a client token (a request the door refuses for
    its token is no client's)."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        keep: int = 2000,
        keep_bytes: int = 256 << 20,
        tokens: Tokens | None = None,
    ):
        super().__init__(address, _Handler)
        self.keep, self.keep_bytes = keep, keep_bytes
        self.tokens = tokens or Tokens()
        self.copies: collections.deque[Copy] = collections.deque()
        self.size = 0
        self.taken = 0
        self.lock = threading.Lock()

    def add(self, copy: Copy) -> None:
        with self.lock:
            self.copies.append(copy)
            self.size += len(copy.body)
            while self.copies and (len(self.copies) > self.keep or self.size > self.keep_bytes):
                self.size -= len(self.copies.popleft().body)

    def take(self, n: int, model: str | None = None, route: str | None = None) -> list[Copy]:
        """Up to the `n` newest copies not handed out before (of `model`'s predictions by
        `route`, where given), oldest of them first."""
        with self.lock:
            fresh: list[Copy] = []
            kept: list[Copy] = []
            while self.copies and len(fresh) < n:
                copy = self.copies.pop()
                found = copy.route()
                wanted = (model is None or (found is not None and found[1] == model)) and (
                    route is None or (found is not None and found[0] == route)
                )
                (fresh if wanted else kept).append(copy)
            self.copies.extend(reversed(kept))
            self.size -= sum(len(c.body) for c in fresh)
            self.taken += len(fresh)
            return fresh[::-1]

    def start(self) -> Recorder:
        """Serve in a daemon thread (stop with shutdown() and server_close())."""
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self


def main(argv: list[str] | None = None) -> int:
    raw = argparse.RawDescriptionHelpFormatter
    p = argparse.ArgumentParser("python -m deploy.mirror", description=__doc__, formatter_class=raw)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("record", help="keep the mirrored copies and hand them to the judge")
    r.add_argument("--host", default="0.0.0.0")
    r.add_argument("--port", type=int, default=PORT)
    r.add_argument("--keep", type=int, default=2000, help="copies kept, the newest")
    r.add_argument("--keep-mib", type=int, default=256, help="MiB of bodies kept, the newest")
    r.add_argument(
        "--token-file",
        type=Path,
        help="client tokens, one a line: keep only copies of requests with one (the door's file)",
    )
    sub.add_parser("nginx-config", help="print a serving pod's nginx config (k8s_config)")
    args = p.parse_args(argv)
    if args.command == "nginx-config":
        print(k8s_config(), end="")
        return 0
    tokens = Tokens(args.token_file)
    server = Recorder((args.host, args.port), args.keep, args.keep_mib << 20, tokens)
    print(f"mirror recorder on {args.host}:{args.port}", file=sys.stderr, flush=True)
    # The container's PID 1: SIGTERM has no default action there, so the pod's deletion would
    # wait out its grace period without this.
    signal.signal(signal.SIGTERM, _interrupt)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    server.server_close()
    return 0


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
