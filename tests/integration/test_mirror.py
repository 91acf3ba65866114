"""The rollout's live-traffic mirror (rehearsal/mirror.py), a real nginx in front of a door: every
prediction a client sends is answered by the door as it would be without the mirror and copied,
once, path and body as sent, to the recorder; other routes are not copied; and a recorder that is
gone or never answers costs the clients nothing but the copies."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from rehearsal.mirror import Mirror

pytestmark = pytest.mark.integration


class _Door(BaseHTTPRequestHandler):
    """A stand-in for the balancer: answers each POST with what it got, and who it was."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        out = json.dumps({"path": self.path, "body": body.decode(), "door": True}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def mirror(tmp_path) -> Iterator[Mirror]:
    door = ThreadingHTTPServer(("127.0.0.1", 0), _Door)
    threading.Thread(target=door.serve_forever, daemon=True).start()
    m = Mirror(tmp_path / "mirror", f"127.0.0.1:{door.server_address[1]}").start()
    yield m
    m.stop()
    door.shutdown()


def _wait_for(predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_each_prediction_is_answered_by_the_door_and_copied_once_as_sent(mirror):
    session = requests.Session()
    sent = []
    for i in range(20):
        path = "/predictions/tabular" if i % 2 else "/v2/models/tabular/infer"
        body = json.dumps({"i": i, "text": "caf\u00e9"}).encode()
        r = session.post(
            mirror.http + path, data=body, headers={"Content-Type": "application/json"}
        )
        assert r.status_code == 200 and r.json() == {
            "path": path,
            "body": body.decode(),
            "door": True,
        }
        sent.append((path, body))
    for route in ("/ping", "/models", "/predictions/tabular/explain"):
        assert session.post(mirror.http + route, data=b"{}").json()["path"] == route
    _wait_for(lambda: len(mirror.copies()) >= len(sent))
    time.sleep(0.3)  # nothing else arrives
    assert [(c.path, c.body) for c in mirror.copies()] == sent
    assert {c.content_type for c in mirror.copies()} == {"application/json"}
    # take(n): the newest not handed out before, oldest of them first; then the rest.
    assert [c.body for c in mirror.take(3)] == [b for _, b in sent[-3:]]
    assert [c.body for c in mirror.take(100)] == [b for _, b in sent[:-3]]
    assert mirror.take(5) == [] and mirror.taken == len(sent)


@pytest.mark.parametrize("recorder", ["gone", "never answers"])
def test_a_recorder_that_is_gone_or_stalls_costs_the_clients_nothing(mirror, recorder):
    assert mirror.recorder is not None
    port = mirror.recorder.server_address[1]
    mirror.recorder.shutdown()
    mirror.recorder.server_close()
    stall = None
    if recorder == "never answers":  # accepts connections (the kernel's backlog), reads nothing
        stall = socket.socket()
        stall.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        stall.bind(("127.0.0.1", port))
        stall.listen(64)
    try:
        times = []
        for i in range(10):  # a new connection each: a client's own request never waits for a copy
            began = time.perf_counter()
            r = requests.post(f"{mirror.http}/predictions/tabular", json={"i": i}, timeout=10)
            times.append(time.perf_counter() - began)
            assert r.status_code == 200 and json.loads(r.json()["body"]) == {"i": i}
        assert max(times) < 0.5, times
        assert mirror.copies() == []
    finally:
        if stall is not None:
            stall.close()
