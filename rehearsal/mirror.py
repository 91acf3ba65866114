"""Live-traffic mirroring for a rollout's judgement: nginx (its mirror module) in front of the
balancer hands every REST prediction to the balancer as it came and a copy of it to a recorder in
this process, so the candidate is judged on what clients really send.

HAProxy 2.6, the door, has no mirroring; nginx's `mirror` does it for HTTP/1.1 bodies (not for
gRPC: its clients are judged through the REST copies of the same model's requests). The client's
answer is the balancer's, whatever the copy meets: the recorder answers 204 at once, and nginx
gives a copy 200 ms to connect and 1 s to be answered before it drops it (a copy that is slow
holds back the next request on the same client connection, never the answer to this one). The
recorder keeps the newest `keep` copies; `take(n)` hands out the newest not yet judged.
"""

from __future__ import annotations

import collections
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from rehearsal.pod import free_port

PREDICTIONS = r"^/(predictions/[^/]+|v2/models/[^/]+(/versions/[^/]+)?/infer)$"
"""The routes copied: predictions (TorchServe) and inference (the Open Inference Protocol)."""

CONFIG = """\
daemon off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    # A mirrored body must be in memory: the door's own limit, in one buffer.
    client_max_body_size {max_body};
    client_body_buffer_size {max_body};
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_buffering off;
    proxy_read_timeout 300s;
    upstream door {{ server {upstream}; keepalive 32; }}
    upstream recorder {{ server 127.0.0.1:{recorder}; keepalive 8; }}
    server {{
        listen 127.0.0.1:{port};
        location ~ "{predictions}" {{
            mirror /_mirror;
            mirror_request_body on;
            proxy_pass http://door;
        }}
        location / {{ proxy_pass http://door; }}
        location = /_mirror {{
            internal;
            proxy_pass http://recorder$request_uri;
            proxy_connect_timeout 200ms;
            proxy_send_timeout 1s;
            proxy_read_timeout 1s;
        }}
    }}
}}
"""


@dataclass(frozen=True)
class Copy:
    """One client request as it reached the door: its path, content type and body."""

    path: str
    content_type: str
    body: bytes
    at: float


class _Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _RecorderServer

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        size = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(size)
        self.server.copies.append(
            Copy(self.path, self.headers.get("Content-Type", ""), body, time.time())
        )
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


class _RecorderServer(ThreadingHTTPServer):
    daemon_threads = True
    copies: collections.deque[Copy]


@dataclass
class Mirror:
    root: Path
    upstream: str
    """host:port the clients' requests go on to (the balancer's REST port)."""
    keep: int = 2000
    max_body: str = "8m"
    port: int = 0
    proc: subprocess.Popen | None = None
    recorder: _RecorderServer | None = None
    taken: int = 0

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 15) -> Mirror:
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.root.mkdir(parents=True, exist_ok=True)
        self.recorder = _RecorderServer(("127.0.0.1", 0), _Recorder)
        self.recorder.copies = collections.deque(maxlen=self.keep)
        threading.Thread(target=self.recorder.serve_forever, daemon=True).start()
        self.port = free_port()
        config = self.root / "nginx.conf"
        config.write_text(
            CONFIG.format(
                root=self.root,
                port=self.port,
                upstream=self.upstream,
                recorder=self.recorder.server_address[1],
                predictions=PREDICTIONS,
                max_body=self.max_body,
            )
        )
        with open(self.root / "nginx.out", "ab") as out:
            self.proc = subprocess.Popen(
                [nginx, "-p", str(self.root), "-c", str(config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    log = (self.root / "nginx.out").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"nginx did not start:\n{log}") from None
                time.sleep(0.1)
        return self

    def copies(self) -> list[Copy]:
        """Every copy kept, oldest first."""
        assert self.recorder is not None
        return list(self.recorder.copies)

    def take(self, n: int) -> list[Copy]:
        """Up to the `n` newest copies not handed out before (the recorder keeps `keep`)."""
        assert self.recorder is not None
        fresh: list[Copy] = []
        while self.recorder.copies and len(fresh) < n:
            fresh.append(self.recorder.copies.pop())
        self.taken += len(fresh)
        return fresh[::-1]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful: in-flight requests finish
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.recorder is not None:
            self.recorder.shutdown()
            self.recorder.server_close()
