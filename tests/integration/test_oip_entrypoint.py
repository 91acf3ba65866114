"""The serving image's entrypoint (docker/entrypoint.sh) in OIP mode: RUNTIME=oip starts the Open
Inference Protocol server over the archives in the model store, as the pod runs it (from the
checkout: TS_APP_DIR is the repository, OIP_PYTHON its .venv-oip); TorchServe stays the default."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import requests

from rehearsal.pod import free_port
from tests.fixtures.oip import OIP_PYTHON

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"


def environment(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TS_CONFIG_FILE"}
    return env | {
        "TS_WORKDIR": str(tmp / "work"),
        "TS_APP_DIR": str(ROOT),
        "TMPDIR": str(tmp / "tmp"),
        "PYTHONPATH": str(ROOT),  # the image's PYTHONPATH is its app folder
        "OIP_PYTHON": str(OIP_PYTHON),
        "RUNTIME": "oip",
        **extra,
    }


@pytest.fixture(scope="module")
def pod(frequency_archive, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("oip-pod")
    store = tmp / "work" / "model_store"
    store.mkdir(parents=True)
    (store / "frequency.mar").write_bytes(Path(frequency_archive).read_bytes())
    tokens = tmp / "tokens"
    tokens.write_text("first-token\nsecond-token\n")  # a Secret during a rotation: both work
    http = free_port()
    env = environment(
        tmp,
        OIP_HTTP_PORT=str(http),
        OIP_GRPC_PORT=str(free_port()),
        OIP_METRICS_PORT=str(free_port()),
        OIP_TOKEN_FILE=str(tokens),
    )
    log = open(tmp / "stdout.log", "wb")  # noqa: SIM115 (lives as long as the server)
    proc = subprocess.Popen(
        [str(ENTRYPOINT)], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{http}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, (tmp / "stdout.log").read_text()[-3000:]
            try:
                if requests.get(f"{url}/v2/health/ready", timeout=2).ok:
                    break
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline, (tmp / "stdout.log").read_text()[-3000:]
            time.sleep(0.5)
        yield {"proc": proc, "url": url, "tmp": tmp}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()


def infer(url: str, token: str | None, samples: int = 64) -> requests.Response:
    body = {
        "inputs": [
            {"name": "signal", "datatype": "FP32", "shape": [samples], "data": [0.5] * samples}
        ]
    }
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.post(f"{url}/v2/models/frequency/infer", json=body, headers=headers, timeout=60)


def test_runtime_oip_serves_the_stores_archives_over_the_protocol(pod):
    r = requests.get(f"{pod['url']}/v2/models/frequency", timeout=10)
    assert r.status_code == 200 and r.json()["name"] == "frequency"
    answer = infer(pod["url"], "first-token")
    assert answer.status_code == 200, answer.text
    assert {o["name"] for o in answer.json()["outputs"]} >= {"signal", "std", "frequencies"}


def test_every_token_of_the_file_is_accepted_and_none_else(pod):
    assert infer(pod["url"], "second-token").status_code == 200
    assert infer(pod["url"], None).status_code == 401
    assert infer(pod["url"], "first-token second-token").status_code == 401  # the whole file
    assert infer(pod["url"], "third-token").status_code == 401


def test_the_body_limit_is_config_properties_max_request_size(pod):
    limit = next(
        int(line.split("=", 1)[1])
        for line in (ROOT / "config.properties").read_text().splitlines()
        if line.startswith("max_request_size=")
    )
    r = requests.post(
        f"{pod['url']}/v2/models/frequency/infer",
        data=b"x" * (limit + 1),
        headers={"Authorization": "Bearer first-token", "Content-Type": "application/json"},
        timeout=60,
    )
    assert r.status_code == 413 and r.json()["kind"] == "too_large"


def test_sigterm_stops_the_server(pod):
    proc = pod["proc"]
    proc.send_signal(signal.SIGTERM)  # what tini forwards when the kubelet stops the container
    assert proc.wait(timeout=60) is not None

    def gone() -> bool:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return True
        return False

    deadline = time.monotonic() + 30
    while not gone() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert gone(), "the OIP server outlived the entrypoint"


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"OIP_HOST": "0.0.0.0"}, "OIP_HOST=0.0.0.0 and no OIP_TOKEN_FILE"),
        ({"RUNTIME": "triton"}, "RUNTIME=triton: torchserve (the default) or oip"),
        ({}, "no archive in"),
    ],
    ids=["open-without-tokens", "unknown-runtime", "empty-store"],
)
def test_the_entrypoint_refuses_what_it_cannot_serve_safely(tmp_path, extra, says):
    out = subprocess.run(
        [str(ENTRYPOINT)],
        env=environment(tmp_path, **extra),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 78, out.stderr
    assert says in out.stderr
