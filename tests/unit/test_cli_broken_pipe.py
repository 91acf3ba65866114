"""`python -m clients predict … | head` ends quietly: no traceback once the pipe's reader is gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from clients.pipes import SIGPIPE_EXIT

ROOT = Path(__file__).resolve().parents[2]
ANSWER = {"label": "positive", "probabilities": {"positive": 0.9, "negative": 0.1}}


class _Answers(BaseHTTPRequestHandler):
    def _reply(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"status": "Healthy"} if self.path == "/ping" else ANSWER).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _reply

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def server_config(tmp_path_factory):
    """A config.properties naming a stand-in inference API that answers every prediction."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = tmp_path_factory.mktemp("cli") / "config.properties"
    config.write_text(f"inference_address=http://127.0.0.1:{server.server_port}\n")
    yield config
    server.shutdown()


def run_into_closed_pipe(*args: str) -> subprocess.CompletedProcess:
    """Run a CLI whose stdout is a pipe nobody reads any more (`| head` after head exited)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", *args],
            cwd=ROOT,
            env=os.environ | {"TS_INFERENCE_KEY": "k", "PYTHONPATH": str(ROOT)},
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write)


@pytest.mark.parametrize(
    "args",
    [
        ["predict", "sentiment", "--text", "A warm, funny film"],
        ["health"],
    ],
    ids=["predict", "health"],
)
def test_clients_exit_quietly_when_the_reader_goes_away(server_config, args):
    out = run_into_closed_pipe("clients", *args, "--config", str(server_config))
    assert "Traceback" not in out.stderr and "BrokenPipeError" not in out.stderr, out.stderr
    assert out.returncode == SIGPIPE_EXIT, out.stderr


def test_clients_still_answer_into_an_open_pipe(server_config):
    out = subprocess.run(
        [sys.executable, "-m", "clients", "predict", "sentiment", "--text", "x"]
        + ["--config", str(server_config)],
        cwd=ROOT,
        env=os.environ | {"TS_INFERENCE_KEY": "k", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == ANSWER
