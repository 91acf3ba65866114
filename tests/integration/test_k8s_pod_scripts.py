"""The pod's own scripts against a real TorchServe: entrypoint and exec probe.

One model-less TorchServe is started the way the pod starts it: docker/entrypoint.sh writes
config.properties from the rendered ConfigMap (one file per key, as the volume mounts it). The pod
itself runs TorchServe without tokens behind the proxy (tests/integration/test_pod_proxy.py); here
token authorization is switched back on, as the image's baked-in config has it (`docker run`), and
keys expire after 6 s, so the probe's key renewal is exercised for real.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from deploy.k8s_check import render
from handlers.frequency.state import KEY_FILE_ENV
from tests.support.torchserve import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pod(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pod")
    work, config_dir = tmp / "work", tmp / "config"
    config_dir.mkdir()
    (cm,) = [
        o for o in render("cpu").objects if o["metadata"]["name"].startswith("torchserve-config")
    ]
    ports = {k: free_port() for k in ("inference", "management", "metrics", "grpc", "grpc_mgmt")}
    settings = cm["data"] | {
        "inference_address": f"http://127.0.0.1:{ports['inference']}",
        "management_address": f"http://127.0.0.1:{ports['management']}",
        "metrics_address": f"http://127.0.0.1:{ports['metrics']}",
        "grpc_inference_port": str(ports["grpc"]),
        "grpc_management_port": str(ports["grpc_mgmt"]),
        "load_models": "",
        "disable_token_authorization": "false",
        "token_expiration_min": "0.1",
    }
    for key, value in settings.items():
        (config_dir / key).write_text(value)
    env = os.environ | {
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "TS_WORKDIR": str(work),
        "TS_CONFIG_DIR": str(config_dir),
        "TS_APP_DIR": str(ROOT),
        "TMPDIR": str(tmp / "tmp"),
        "LOG_LOCATION": str(work / "logs"),
        "METRICS_LOCATION": str(work / "logs"),
    }
    log = open(tmp / "stdout.log", "wb")  # noqa: SIM115 (lives as long as the server)
    proc = subprocess.Popen(
        [str(ROOT / "docker/entrypoint.sh")],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    urls = {
        "inference": settings["inference_address"],
        "management": settings["management_address"],
        "grpc": f"127.0.0.1:{ports['grpc']}",
    }
    try:
        deadline = time.monotonic() + 120
        while not (work / "key_file.json").exists():
            assert proc.poll() is None, (tmp / "stdout.log").read_text()
            assert time.monotonic() < deadline, "TorchServe wrote no key file"
            time.sleep(0.2)
        yield {"proc": proc, "work": work, "urls": urls, "tmp": tmp}
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        log.close()


def probe(pod, *args: str, workdir: Path | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "docker/probe.py"), *args]
    cmd += ["--management", pod["urls"]["management"], "--workdir", str(workdir or pod["work"])]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def wait_for(check, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while not (result := check()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return result


def test_entrypoint_renders_the_configmap_into_the_config_torchserve_runs(pod):
    written = (pod["work"] / "config.properties").read_text()
    assert "disable_token_authorization=false" in written
    assert f"inference_address={pod['urls']['inference']}" in written
    assert (pod["work"] / "metrics.yaml").is_file() and (pod["work"] / "model_store").is_dir()


def test_ping_without_the_replica_key_is_refused_but_the_probe_passes(pod):
    assert wait_for(
        lambda: probe(pod, "live", "--inference", pod["urls"]["inference"]).returncode == 0
    )
    r = requests.get(f"{pod['urls']['inference']}/ping", timeout=10)
    assert r.status_code == 400 and r.json()["type"] == "InvalidKeyException"


def test_readiness_fails_while_a_configured_model_has_no_ready_worker(pod, tmp_path):
    (tmp_path / "key_file.json").symlink_to(pod["work"] / "key_file.json")
    (tmp_path / "config.properties").write_text("load_models=sentiment.mar\n")
    out = probe(pod, "ready", "--inference", pod["urls"]["inference"], workdir=tmp_path)
    assert out.returncode == 1 and "sentiment" in out.stderr
    assert probe(pod, "ready", "--inference", pod["urls"]["inference"]).returncode == 0


def test_probe_fails_clearly_without_a_key_file(pod, tmp_path):
    out = probe(pod, "live", "--inference", pod["urls"]["inference"], workdir=tmp_path)
    assert out.returncode == 1 and "key_file.json" in out.stderr


def test_expired_replica_keys_are_renewed_by_the_probe(pod):
    keys = json.loads((pod["work"] / "key_file.json").read_text())
    expiry = keys["inference"]["expiration time"][:19]
    wait_for(lambda: time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) > expiry, 30)
    assert probe(pod, "live", "--inference", pod["urls"]["inference"]).returncode == 0
    renewed = json.loads((pod["work"] / "key_file.json").read_text())["inference"]["key"]
    assert renewed != keys["inference"]["key"]


def test_entrypoint_refuses_tokens_off_on_an_address_outside_the_pod(tmp_path):
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    settings = {"disable_token_authorization": "true", "inference_address": "http://0.0.0.0:1"}
    for key, value in settings.items():
        (config_dir / key).write_text(value)
    env = os.environ | {
        "TS_WORKDIR": str(tmp_path / "work"),
        "TS_CONFIG_DIR": str(config_dir),
        "TS_APP_DIR": str(ROOT),
        "TMPDIR": str(tmp_path / "tmp"),
    }
    out = subprocess.run(
        [str(ROOT / "docker/entrypoint.sh")], env=env, capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 78 and "inference_address=http://0.0.0.0:1" in out.stderr


@pytest.mark.parametrize("key", [None, "", "too-short\n"], ids=["missing", "empty", "short"])
def test_entrypoint_refuses_to_start_without_a_usable_stream_state_key(tmp_path, key):
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "inference_address").write_text("http://127.0.0.1:1")
    key_file = tmp_path / "secret" / "key"
    if key is not None:
        key_file.parent.mkdir()
        key_file.write_text(key)
    env = os.environ | {
        "TS_WORKDIR": str(tmp_path / "work"),
        "TS_CONFIG_DIR": str(config_dir),
        "TS_APP_DIR": str(ROOT),
        "TMPDIR": str(tmp_path / "tmp"),
        KEY_FILE_ENV: str(key_file),
    }
    out = subprocess.run(
        [str(ROOT / "docker/entrypoint.sh")], env=env, capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 78, out.stderr
    assert "torchserve-stream-state-key" in out.stderr and str(key_file) in out.stderr


def test_sigterm_to_the_entrypoint_stops_the_java_server(pod):
    proc = pod["proc"]
    assert proc.poll() is None
    proc.send_signal(signal.SIGTERM)  # what tini forwards when the kubelet stops the container
    proc.wait(timeout=90)
    assert proc.returncode == 0, "a drained server's container exits 0, not 128 + SIGTERM"

    def group_gone() -> bool:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return True
        return False

    assert wait_for(group_gone, 30), "Java (or a worker) outlived the entrypoint"
    assert not (pod["work"] / "key_file.json").exists()  # torchserve --stop ran
