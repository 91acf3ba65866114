"""`make serve` starts the door before TorchServe listens, so the door's first health checks fail
and it marks both paths down; it marks them up again only at a later check (every 2 s). Models
can be READY inside that window, and a client's first gRPC call then met the door's 503
("replica full or not serving"). `python -m deploy.local_door ready` (the last step of
`make serve`) waits for the door's own readiness endpoint. Here a stand-in backend answers
/ping the way TorchServe does, started only after the door has marked it down."""

from __future__ import annotations

import contextlib
import http.server
import threading
import time

import pytest
import requests

from deploy import local_door
from rehearsal.pod import free_port

pytestmark = [pytest.mark.integration, pytest.mark.serial]


class _Ping(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        body = b'{"status": "Healthy"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(ConnectionError):  # HAProxy's check closes early
            self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_ready_returns_only_once_requests_through_the_door_reach_the_backend(tmp_path):
    backend_port, health_port = free_port(), free_port()
    listen = ("127.0.0.1", free_port(), free_port())
    env = local_door.door_env(
        {},
        tmp_path,
        f"127.0.0.1:{backend_port}",
        f"127.0.0.1:{free_port()}",
        listen=listen,
        PROXY_METRICS_PORT=str(free_port()),
        PROXY_HEALTH_PORT=str(health_port),
    )
    local_door.start(env, tmp_path)
    server = None
    try:
        ready = f"http://127.0.0.1:{health_port}/ready"
        deadline = time.monotonic() + 30
        while requests.get(ready, timeout=5).status_code != 503:
            assert time.monotonic() < deadline, "the door never marked the closed backend down"
            time.sleep(0.2)
        time.sleep(4.5)  # fall 2 x inter 2 s: both backends are down by now
        assert requests.get(ready, timeout=5).status_code == 503
        server = http.server.ThreadingHTTPServer(("127.0.0.1", backend_port), _Ping)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started = time.monotonic()
        local_door.wait_ready(health_port, wait_s=30)
        waited = time.monotonic() - started
        answers = [
            requests.get(f"http://127.0.0.1:{listen[1]}/ping", timeout=5).status_code
            for _ in range(20)
        ]
        assert answers == [200] * 20, answers
        assert waited < 10, f"ready took {waited:.1f} s after the backend listened"
        with pytest.raises(TimeoutError, match="did not say ready"):
            local_door.wait_ready(free_port(), wait_s=1)
    finally:
        if server is not None:
            server.shutdown()
        assert local_door.stop(tmp_path)
