"""The rollout's live-traffic mirror (deploy/mirror.py, rehearsal/mirror.py), a real nginx in front
of a door: every prediction a client sends is answered by the door as it would be without the
mirror and copied, once, path and body as sent, to the recorder; other routes are not copied; a
recorder that is gone or never answers costs the clients nothing but the copies; the recorder
hands each model's copies out once; and the pods' config (k8s/components/rollout/nginx.conf) is
the one rendered, accepted by nginx, and feeds the recorder run on its own."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from deploy.mirror import K8S_LISTEN, PORT, Copy, Recorder, k8s_config
from deploy.rollout import send as rollout_send
from rehearsal.mirror import Mirror
from rehearsal.pod import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


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


def test_the_judges_own_requests_are_answered_and_not_copied(mirror):
    """deploy/rollout.py `send` marks the judge's requests: through a mirror (the stable and
    canary Services on Kubernetes) they reach the door and are not copied."""
    server, url = mirror, mirror.http
    exchange = rollout_send(url, "tabular", {"i": 1}, token="t")
    assert exchange.status == 200 and exchange.body["path"] == "/predictions/tabular"
    requests.post(f"{url}/predictions/tabular", json={"i": 2}, timeout=5)
    _wait_for(lambda: len(server.copies()) >= 1)
    time.sleep(0.3)  # nothing else arrives
    assert [c.body for c in server.copies()] == [b'{"i": 2}']


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


def _up(url: str) -> bool:
    try:
        requests.get(url, timeout=1)
    except requests.ConnectionError:
        return False
    return True


def _post(url: str, body: bytes, **headers: str) -> None:
    requests.post(url, data=body, headers={"Content-Type": "application/json"} | headers)


def _copies(url: str, **query: object) -> list[Copy]:
    r = requests.get(f"{url}/copies", params=query, timeout=5)
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/jsonl"
    return [Copy.from_line(x) for x in r.text.splitlines()]


def test_the_recorder_hands_each_models_newest_copies_out_once_over_http():
    recorder = Recorder(("127.0.0.1", 0), keep=6, keep_bytes=1 << 20).start()
    url = f"http://127.0.0.1:{recorder.server_address[1]}"
    try:
        sent = [
            ("/predictions/tabular", b'{"i": 0}'),
            ("/v2/models/tabular/infer", b'{"inputs": []}'),
            ("/predictions/digits", b'{"i": 1}'),
            ("/predictions/tabular", b"\x00\xff not json"),
            ("/v2/models/tabular/versions/2/infer", b'{"inputs": [1]}'),
            ("/predictions/tabular", b'{"i": 2}'),
        ]
        for path, body in sent:
            _post(url + path, body)
        assert requests.get(f"{url}/healthz").json() == {"copies": 6, "taken": 0}
        got = _copies(url, model="tabular", route="predictions", n=2)
        assert [(c.path, c.body) for c in got] == [sent[3], sent[5]]  # bytes as sent
        (first,) = _copies(url, model="tabular", route="predictions", n=2)
        assert (first.path, first.body, first.content_type) == (*sent[0], "application/json")
        infer = _copies(url, model="tabular", route="infer", n=10)
        assert [c.path for c in infer] == [sent[1][0], sent[4][0]]
        assert [c.body for c in _copies(url, model="digits", n=10)] == [b'{"i": 1}']
        assert _copies(url, model="tabular", n=10) == [] and recorder.taken == 6
        assert requests.get(f"{url}/healthz").json() == {"copies": 0, "taken": 6}
        # The newest `keep` copies, within `keep_bytes` of bodies: the oldest go first.
        for i in range(10):
            _post(url + "/predictions/tabular", json.dumps({"i": i}).encode())
        assert [c.body for c in _copies(url, n=100)] == [
            json.dumps({"i": i}).encode() for i in range(4, 10)
        ]
        small = Recorder(("127.0.0.1", 0), keep=100, keep_bytes=20)
        for i in range(5):
            small.add(Copy("/predictions/m", "", b"x" * 8, float(i)))
        assert [c.at for c in small.copies] == [3.0, 4.0] and small.size == 16
        small.server_close()
    finally:
        recorder.shutdown()
        recorder.server_close()


def test_the_pods_nginx_config_is_the_one_rendered_and_nginx_accepts_it(tmp_path):
    committed = (ROOT / "k8s/components/rollout/nginx.conf").read_text()
    assert committed == k8s_config(), "k8s/components/rollout/nginx.conf: run `make k8s`"
    local = (
        committed.replace("/tmp/nginx", str(tmp_path))
        .replace(f"rollout-recorder:{PORT}", f"127.0.0.1:{PORT}")
        .replace(f"listen {K8S_LISTEN};", "listen 127.0.0.1:1;")
    )
    (tmp_path / "nginx.conf").write_text(local)
    out = subprocess.run(
        [NGINX, "-e", "stderr", "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr


def test_the_recorder_on_its_own_keeps_what_the_pods_nginx_copies(tmp_path):
    """`python -m deploy.mirror record --token-file` behind nginx with the pods' config: the
    client's answer is the door's; the recorder keeps, as sent, the copies of requests that
    carried a client token (read again when the file changes), and only those."""
    door = ThreadingHTTPServer(("127.0.0.1", 0), _Door)
    threading.Thread(target=door.serve_forever, daemon=True).start()
    port, listen = free_port(), free_port()
    tokens = tmp_path / "tokens"
    tokens.write_text("secret\n other \n")
    argv = ["record", "--host", "127.0.0.1", "--port", str(port), "--token-file", str(tokens)]
    recorder = subprocess.Popen([sys.executable, "-m", "deploy.mirror", *argv], cwd=ROOT)
    config = (
        k8s_config()
        .replace("/tmp/nginx", str(tmp_path))
        .replace("error_log stderr", f"error_log {tmp_path}/error.log")
        .replace(f"rollout-recorder:{PORT}", f"127.0.0.1:{port}")
        .replace("127.0.0.1:8085", f"127.0.0.1:{door.server_address[1]}")
        .replace(f"listen {K8S_LISTEN};", f"listen 127.0.0.1:{listen};")
    )
    (tmp_path / "nginx.conf").write_text(config)
    nginx = subprocess.Popen(
        [NGINX, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")], start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for(lambda: _up(url + "/healthz") and _up(f"http://127.0.0.1:{listen}/"), 15)
        # Copies only of requests with a client token: none, a wrong one, then a good one.
        sent = f"http://127.0.0.1:{listen}/predictions/sentiment"
        for auth in ("", "Bearer wrong", "Basic secret", "Bearer other"):
            r = requests.post(sent, json={"text": "bad"}, headers={"Authorization": auth})
            assert r.json()["door"] is True
        tokens.write_text("secret\n")  # rotated: "other" no longer counts
        requests.post(sent, json={"text": "old"}, headers={"Authorization": "Bearer other"})
        r = requests.post(sent, json={"text": "good"}, headers={"Authorization": "Bearer secret"})
        assert r.json() == {
            "path": "/predictions/sentiment",
            "body": '{"text": "good"}',
            "door": True,
        }
        _wait_for(lambda: requests.get(f"{url}/healthz").json()["copies"] == 2)
        time.sleep(0.3)  # nothing else arrives
        copies = _copies(url, model="sentiment", route="predictions", n=5)
        assert [c.body for c in copies] == [b'{"text": "bad"}', b'{"text": "good"}']
        assert {c.content_type for c in copies} == {"application/json"}
    finally:
        nginx.send_signal(signal.SIGQUIT)
        nginx.wait(timeout=10)
        recorder.terminate()
        recorder.wait(timeout=10)
        door.shutdown()
