"""Outside a pod, `make serve` puts the pod's door (deploy/local_door.py: docker/proxy.sh and
docker/haproxy.cfg, TorchServe checking its own tokens) in front of TorchServe, so every refusal a
user can get is the JSON error body with a request id; bare TorchServe answers a body over
max_request_size with a 413 and an EMPTY body. The door here is started the way `make serve`
starts it, on free ports, in front of the session's real TorchServe (repository config: token
authorization on, max_request_size 1 MiB)."""

from __future__ import annotations

import json
import time

import grpc
import pytest
import requests

from clients import stubs
from clients.errors import AuthError, PayloadTooLarge
from clients.rest_client import RestClient
from clients.settings import ClientSettings
from clients.tokens import TokenSource
from deploy import local_door
from deploy.ts_files import read_properties
from rehearsal.pod import free_port

pytestmark = pytest.mark.integration

REVIEW_3MB = json.dumps({"text": "a long review " * 220_000}).encode()


@pytest.fixture(scope="module")
def door(served, tmp_path_factory):
    props = read_properties(served.workdir / "config.properties")
    run = tmp_path_factory.mktemp("local-door")
    listen = ("127.0.0.1", free_port(), free_port())
    env = local_door.door_env(
        props,
        run,
        f"127.0.0.1:{served.ports['inference']}",
        f"127.0.0.1:{served.ports['grpc_inference']}",
        listen=listen,
        PROXY_METRICS_PORT=str(free_port()),
        PROXY_HEALTH_PORT=str(free_port()),
    )
    local_door.start(env, run)
    url = f"http://127.0.0.1:{listen[1]}"
    deadline = time.monotonic() + 20
    while requests.get(f"{url}/ping", headers=served.auth(), timeout=5).status_code != 200:
        assert time.monotonic() < deadline, "the door never reached TorchServe"
        time.sleep(0.3)
    yield {"http": url, "grpc": f"127.0.0.1:{listen[2]}", "run": run}
    assert local_door.stop(run)


def test_bare_torchserve_answers_an_oversized_body_with_an_empty_413(served):
    """The fault the door is there for (TorchServe's Java frontend refuses before any handler)."""
    r = requests.post(
        f"{served.inference_url}/predictions/sentiment",
        data=REVIEW_3MB,
        headers=served.auth() | {"Content-Type": "application/json"},
        timeout=30,
    )
    assert r.status_code == 413 and r.content == b""


def test_through_the_local_door_an_oversized_body_is_the_json_413(served, door):
    r = requests.post(
        f"{door['http']}/predictions/sentiment",
        data=REVIEW_3MB,
        headers=served.auth() | {"Content-Type": "application/json", "X-Request-ID": "big-1"},
        timeout=30,
    )
    assert r.status_code == 413 and r.headers["X-Request-ID"] == "big-1"
    body = r.json()
    assert body == {
        "error": "request body over max_request_size (1048576 bytes)",
        "kind": "too_large",
        "request_id": "big-1",
    }


def test_the_projects_client_gets_413_payload_too_large_through_the_local_door(served, door):
    settings = ClientSettings(inference_url=door["http"], key_file=None, timeout=30)
    client = RestClient(settings, TokenSource(keys={"inference": served.keys["inference"]}))
    with pytest.raises(PayloadTooLarge) as e:
        client.predict("sentiment", {"text": "a long review " * 220_000})
    assert e.value.status == 413 and e.value.kind == "too_large" and e.value.request_id


def test_torchserve_checks_its_own_tokens_behind_the_local_door(served, door):
    ok = requests.post(
        f"{door['http']}/predictions/sentiment",
        json={"text": "a fine film"},
        headers=served.auth(),
        timeout=30,
    )
    assert ok.status_code == 200 and ok.json()["label"] in {"positive", "negative"}, ok.text
    assert ok.headers["X-Request-ID"]
    # TorchServe's own refusal (400 InvalidKeyException) in the door's shape.
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        r = requests.post(
            f"{door['http']}/predictions/sentiment", json={"text": "x"}, headers=headers, timeout=30
        )
        assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer", r.text
        body = r.json()
        assert body["kind"] == "unauthorized" and body["request_id"] == r.headers["X-Request-ID"]
        assert "org.pytorch" not in r.text and "Exception" not in r.text
    settings = ClientSettings(inference_url=door["http"], key_file=None, timeout=30)
    with pytest.raises(AuthError):
        RestClient(settings, TokenSource(keys={"inference": "wrong"})).predict(
            "sentiment", {"text": "x"}
        )


def test_every_refusal_through_the_local_door_is_json_with_a_request_id(served, door):
    cases = [
        ("POST", "/predictions/no_such_model", 404, "not_found"),
        ("GET", "/models", 404, "not_found"),
        ("GET", "/predictions/sentiment", 405, "method_not_allowed"),
        ("POST", "/predictions/sentiment", 400, "empty_input"),  # the handler's own
    ]
    for method, path, status, kind in cases:
        r = requests.request(
            method, door["http"] + path, json={"text": ""}, headers=served.auth(), timeout=30
        )
        assert r.status_code == status, (path, r.text)
        body = r.json()
        assert body["kind"] == kind and body["request_id"] == r.headers["X-Request-ID"], body


def test_the_worker_logs_the_request_id_the_client_sent_through_the_local_door(served, door):
    r = requests.post(
        f"{door['http']}/predictions/sentiment",
        json={"text": " "},
        headers=served.auth() | {"X-Request-ID": "local-trace-7"},
        timeout=30,
    )
    assert r.status_code == 400 and r.json()["request_id"] == "local-trace-7"
    deadline = time.monotonic() + 10
    while "local-trace-7" not in served.logs():
        assert time.monotonic() < deadline, "the worker's log line has no request id"
        time.sleep(0.2)
    door_log = door["run"] / "door.log"  # HAProxy writes its log lines asynchronously too
    while "request_id=local-trace-7" not in (door_log.read_text() if door_log.exists() else ""):
        assert time.monotonic() < deadline + 10, "the door's log line has no request id"
        time.sleep(0.2)


def test_grpc_passes_the_local_door_with_torchserves_token(served, door):
    pb, pb_grpc, _, _ = stubs.load()
    with grpc.insecure_channel(door["grpc"]) as channel:
        stub = pb_grpc.InferenceAPIsServiceStub(channel)
        request = pb.PredictionsRequest(
            model_name="sentiment", input={"body": json.dumps({"text": "a fine film"}).encode()}
        )
        md = [("authorization", f"Bearer {served.keys['inference']}")]
        answer = stub.Predictions(request, metadata=md, timeout=30)
    assert json.loads(answer.prediction)["label"] in {"positive", "negative"}
