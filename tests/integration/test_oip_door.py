"""The pod's door (docker/proxy.sh + docker/haproxy.cfg) in front of a real Open Inference Protocol
server, started as a RUNTIME=oip pod runs them (rehearsal/pod.py: docker/entrypoint.sh starts the
OIP server, oip/, on loopback without tokens; proxy.sh the door with PROXY_OIP; docker/probe.py
says ready), serving the tiny sentiment archive.

Through the door: the protocol's health, metadata and inference routes and RPCs answer (tritonclient
over REST and gRPC); everything else (KServe's /docs, /openapi.json, /metrics, v1, the repository
routes and RPCs, reflection, other services) is the catalogue's JSON refusal at the door and never
reaches the server (its access log says so, and says so for the routes that do pass); the client
tokens, the body limit and the request id are the TorchServe door's; a refused inference keeps its
own status and request id over REST and gRPC; the handlers' metrics are on the door's metrics port
and nowhere on its public one.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
import requests

from rehearsal.pod import Pod, pod_config
from tests.fixtures.oip import OipServer
from tests.support.oip_client import pack

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

TOKEN, OLD_TOKEN = "oip-door-token", "oip-door-old-token"
SERVICE = "/inference.GRPCInferenceService"
CONFIG = pod_config("cpu")
MAX_REQUEST = int(CONFIG["max_request_size"])
"""The ConfigMap's max_request_size: the door's limit and the OIP server's (the entrypoint's)."""


class Door:
    """The pod's door and what it fronts, as a test reads them."""

    def __init__(self, pod: Pod):
        self.pod = pod
        self.http = pod.http
        self.grpc = pod.grpc
        self.metrics = f"http://127.0.0.1:{pod.ports['proxy_metrics']}"
        self.health = pod.ports["proxy_health"]

    def client(self) -> OipServer:
        """tritonclient through the door (OipServer.run with the door's ports and token)."""
        ports = self.pod.ports
        server = self.pod.procs["torchserve"]
        return OipServer(ports["proxy_http"], ports["proxy_grpc"], TOKEN, server, self.log)

    @property
    def log(self) -> Path:
        """The OIP server's output (the entrypoint execs it): one access line per request."""
        return self.pod.root / "torchserve.log"

    def server_log(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def door(sentiment_archive, tmp_path_factory):
    """One pod the Deployment's way with RUNTIME=oip on both containers: docker/entrypoint.sh
    starts the OIP server on loopback without tokens, docker/proxy.sh the door in front of it,
    docker/probe.py says when both are ready."""
    pod = Pod(
        tmp_path_factory.mktemp("oip-door"),
        {"sentiment": Path(sentiment_archive)},
        [OLD_TOKEN, TOKEN],
        CONFIG,
        runtime="oip",
    ).start()
    try:
        yield Door(pod)
    finally:
        pod.drain(pre_stop=0)


def auth(token: str = TOKEN, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **extra}


def marker() -> str:
    return f"door-{secrets.token_hex(6)}"


def seen_by_server(door: Door, mark: str, wait_s: float = 1.0) -> bool:
    """Whether the server's access log has a request carrying `mark` (in its path or query)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if mark in door.server_log():
            return True
        time.sleep(0.1)
    return mark in door.server_log()


def infer_body(*texts: str, **extra: object) -> dict:
    return {
        "inputs": [
            {"name": "text", "datatype": "BYTES", "shape": [len(texts)], "data": list(texts)}
        ],
        **extra,
    }


# --- what passes -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/v2",
        "/v2/health/live",
        "/v2/health/ready",
        "/v2/models/sentiment",
        "/v2/models/sentiment/ready",
    ],
)
def test_the_protocols_health_and_metadata_routes_pass_and_reach_the_server(door, path):
    mark = marker()
    r = requests.get(f"{door.http}{path}?m={mark}", headers=auth(), timeout=30)
    assert r.status_code == 200, r.text
    assert seen_by_server(door, mark), "an allowed route did not show in the server's access log"


def test_inference_passes_with_either_token_of_a_rotation(door):
    for token in (TOKEN, OLD_TOKEN):
        r = requests.post(
            f"{door.http}/v2/models/sentiment/infer",
            json=infer_body("a fine film"),
            headers=auth(token),
            timeout=60,
        )
        assert r.status_code == 200, r.text
        assert {o["name"] for o in r.json()["outputs"]} >= {"label", "probabilities"}


def test_a_versioned_route_passes_to_the_server_which_answers_it(door):
    """The door passes the protocol's versioned routes; the server answers a version it does not
    serve with its own JSON 404 (not the door's)."""
    r = requests.get(f"{door.http}/v2/models/sentiment/versions/no-such-9", headers=auth())
    assert r.status_code == 404
    assert "has no version" in r.json()["error"]


def test_tritonclient_over_rest_and_grpc_through_the_door(door):
    texts = np.array([b"a fine film", b"dull and long"], dtype=object)
    calls: list[dict] = [
        {"metadata": True, "transport": t, "model": "sentiment"} for t in ("http", "grpc")
    ]
    calls += [
        {
            "transport": t,
            "binary": b,
            "model": "sentiment",
            "id": f"through-{t}-{b}",
            "inputs": [{"name": "text", "datatype": "BYTES", "array": pack(texts)}],
        }
        for t in ("http", "grpc")
        for b in (False, True)
    ]
    results = door.client().run(calls)
    for meta in results[:2]:
        assert meta["live"] and meta["ready"] and meta["model_ready"]
        assert meta["metadata"]["name"] == "sentiment"
    for call, result in zip(calls[2:], results[2:], strict=True):
        assert result["error"] is None, result
        assert result["id"] == call["id"]
        assert set(result["outputs"]) >= {"label", "probabilities"}


# --- what is refused at the door ---------------------------------------------------------------

REFUSED_REST = [
    ("GET", "/"),
    ("GET", "/docs"),
    ("GET", "/redoc"),
    ("GET", "/openapi.json"),
    ("GET", "/metrics"),
    ("GET", "/v1/models"),
    ("GET", "/v1/models/sentiment"),
    ("POST", "/v1/models/sentiment:predict"),
    ("POST", "/v1/models/sentiment:explain"),
    ("POST", "/v2/repository/index"),
    ("POST", "/v2/repository/models/sentiment/load"),
    ("POST", "/v2/repository/models/sentiment/unload"),
    ("GET", "/v2/health"),
    ("GET", "/v2/models"),
    ("GET", "/v2/models/sentiment/"),
    ("POST", "/v2/models/sentiment/infer/"),
    ("POST", "/v2/models/sentiment/generate"),
    ("GET", "/v2/models/sentiment/versions/1/stats"),
    ("GET", "/predictions/sentiment"),
    ("GET", "/ping"),
]


@pytest.mark.parametrize(("method", "path"), REFUSED_REST)
def test_every_other_route_is_refused_at_the_door_and_never_reaches_the_server(door, method, path):
    mark = marker()
    r = requests.request(
        method,
        f"{door.http}{path}?m={mark}",
        headers=auth(**{"X-Request-ID": mark}),
        json={},
        timeout=30,
    )
    assert r.status_code == 404, (path, r.status_code, r.text)
    body = r.json()
    assert body["kind"] == "not_found" and "Open Inference Protocol" in body["error"]
    assert body["request_id"] == mark and r.headers["X-Request-ID"] == mark
    assert not seen_by_server(door, mark), f"{path} reached the server"


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("GET", "/v2/models/sentiment/infer", "POST"),
        ("PUT", "/v2/models/sentiment/infer", "POST"),
        ("POST", "/v2/health/ready", "GET"),
        ("DELETE", "/v2/models/sentiment", "GET"),
    ],
)
def test_a_protocol_route_with_another_method_is_405_at_the_door(door, method, path, allow):
    mark = marker()
    r = requests.request(method, f"{door.http}{path}?m={mark}", headers=auth(), timeout=30)
    assert r.status_code == 405 and r.headers["Allow"] == allow
    assert r.json()["kind"] == "method_not_allowed"
    assert not seen_by_server(door, mark)


@pytest.mark.parametrize(
    "rpc",
    [
        f"{SERVICE}/RepositoryIndex",
        f"{SERVICE}/RepositoryModelLoad",
        f"{SERVICE}/RepositoryModelUnload",
        f"{SERVICE}/ModelStatistics",
        f"{SERVICE}/ModelStreamInfer",
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        "/grpc.health.v1.Health/Check",
        "/org.pytorch.serve.grpc.inference.InferenceAPIsService/Predictions",
    ],
)
def test_every_other_rpc_is_unimplemented_at_the_door(door, rpc):
    with grpc.insecure_channel(door.grpc) as channel:
        call = channel.unary_unary(rpc)
        with pytest.raises(grpc.RpcError) as refused:
            call(b"", metadata=[("authorization", f"Bearer {TOKEN}")], timeout=10)
    assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "not served here" in refused.value.details()
    md = dict(refused.value.trailing_metadata() or ())
    md |= dict(refused.value.initial_metadata() or ())
    assert md.get("error-kind") == "not_implemented"


def test_the_protocols_health_rpcs_pass(door):
    """ServerLive / ServerReady take an empty message: sent as raw bytes, they come back OK."""
    with grpc.insecure_channel(door.grpc) as channel:
        for rpc in ("ServerLive", "ServerReady"):
            answer = channel.unary_unary(f"{SERVICE}/{rpc}")(
                b"", metadata=[("authorization", f"Bearer {TOKEN}")], timeout=10
            )
            assert answer == b"\x08\x01"  # {live: true} / {ready: true}


# --- tokens ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": TOKEN},
        {"Authorization": f"Basic {TOKEN}"},
    ],
    ids=["none", "wrong", "no-scheme", "basic"],
)
@pytest.mark.parametrize("path", ["/v2/models/sentiment/infer", "/v2/health/ready"])
def test_rest_without_a_valid_token_is_401_at_the_door(door, headers, path):
    mark = marker()
    method = "POST" if path.endswith("/infer") else "GET"
    r = requests.request(
        method, f"{door.http}{path}?m={mark}", json=infer_body("x"), headers=headers, timeout=30
    )
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer"
    assert r.json()["kind"] == "unauthorized"
    assert not seen_by_server(door, mark)


def test_grpc_without_a_valid_token_is_unauthenticated_at_the_door(door):
    results = door.client().run(
        [
            {
                "transport": "grpc",
                "model": "sentiment",
                "token": False,
                "inputs": [
                    {
                        "name": "text",
                        "datatype": "BYTES",
                        "array": pack(np.array([b"x"], dtype=object)),
                    }
                ],
            }
        ]
    )
    assert "UNAUTHENTICATED" in results[0]["error"]["status"]
    with grpc.insecure_channel(door.grpc) as channel, pytest.raises(grpc.RpcError) as refused:
        channel.unary_unary(f"{SERVICE}/ServerLive")(
            b"", metadata=[("authorization", "Bearer wrong")], timeout=10
        )
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED


# --- refusals keep their status and request id -------------------------------------------------


def test_a_refused_rest_inference_keeps_its_status_and_the_clients_request_id(door):
    mark = marker()
    r = requests.post(
        f"{door.http}/v2/models/sentiment/infer",
        json=infer_body(""),
        headers=auth(**{"X-Request-ID": mark}),
        timeout=60,
    )
    assert r.status_code == 400, r.text
    assert r.json() == {"error": r.json()["error"], "kind": "empty_input", "request_id": mark}
    assert r.headers["X-Request-ID"] == mark


def test_a_refused_rest_inference_with_its_own_id_says_that_id_in_body_and_header(door):
    r = requests.post(
        f"{door.http}/v2/models/sentiment/infer",
        json=infer_body("", id="the-request-own-id"),
        headers=auth(),
        timeout=60,
    )
    assert r.status_code == 400
    assert r.json()["request_id"] == "the-request-own-id"
    assert r.headers["X-Request-ID"] == "the-request-own-id"


def test_without_a_client_id_the_doors_own_id_is_in_the_servers_refusal(door):
    r = requests.post(
        f"{door.http}/v2/models/sentiment/infer",
        json={"inputs": [{"name": "nope", "datatype": "BYTES", "shape": [1], "data": ["x"]}]},
        headers=auth(),
        timeout=60,
    )
    assert r.status_code == 400 and r.json()["kind"] == "bad_field"
    assert r.json()["request_id"] == r.headers["X-Request-ID"] != ""


def test_a_refused_grpc_inference_keeps_its_status_and_request_id(door):
    mark = marker()
    empty = pack(np.array([b""], dtype=object))
    [result] = door.client().run(
        [
            {
                "transport": "grpc",
                "model": "sentiment",
                "headers": {"x-request-id": mark},
                "inputs": [{"name": "text", "datatype": "BYTES", "array": empty}],
            }
        ]
    )
    assert "INVALID_ARGUMENT" in result["error"]["status"], result
    details = json.loads(result["error"]["message"])
    assert details["kind"] == "empty_input" and details["request_id"] == mark


# --- bodies ------------------------------------------------------------------------------------


def test_a_body_over_the_limit_is_413_at_the_door(door):
    mark = marker()
    r = requests.post(
        f"{door.http}/v2/models/sentiment/infer?m={mark}",
        data=b"x" * (MAX_REQUEST + 1),
        headers=auth(**{"Content-Type": "application/json"}),
        timeout=60,
    )
    assert r.status_code == 413 and r.json()["kind"] == "too_large"
    assert not seen_by_server(door, mark)


def test_a_chunked_upload_is_411_at_the_door(door):
    def chunks():
        yield b'{"inputs": []}'

    r = requests.post(
        f"{door.http}/v2/models/sentiment/infer", data=chunks(), headers=auth(), timeout=30
    )
    assert r.status_code == 411 and r.json()["kind"] == "length_required"


def test_a_grpc_message_over_the_limit_is_resource_exhausted_at_the_door(door):
    with grpc.insecure_channel(door.grpc) as channel, pytest.raises(grpc.RpcError) as refused:
        channel.unary_unary(f"{SERVICE}/ModelInfer")(
            b"\x0a" + b"x" * MAX_REQUEST,
            metadata=[("authorization", f"Bearer {TOKEN}")],
            timeout=30,
        )
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


# --- health and metrics ------------------------------------------------------------------------


def test_the_doors_ready_endpoint_follows_the_servers_health(door):
    r = requests.get(f"http://127.0.0.1:{door.health}/ready", timeout=10)
    assert r.status_code == 200


def _sample(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name + "{"):
            continue
        head, _, value = line.rpartition(" ")
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            total += float(value)
    return total


def test_the_handlers_metrics_are_on_the_doors_metrics_port_only(door):
    def scrape() -> str:
        r = requests.get(f"{door.metrics}/metrics", timeout=10)
        assert r.status_code == 200
        return r.text

    refused = "ts_handler_refused_requests_total"
    before = scrape()
    ok = requests.post(
        f"{door.http}/v2/models/sentiment/infer", json=infer_body("a fine film"), headers=auth()
    )
    bad = requests.post(
        f"{door.http}/v2/models/sentiment/infer", json=infer_body(""), headers=auth()
    )
    assert ok.status_code == 200 and bad.status_code == 400
    after = scrape()
    labels = {"ModelName": "sentiment", "Level": "Model"}
    assert (
        _sample(after, refused, Reason="empty_input", **labels)
        - _sample(before, refused, Reason="empty_input", **labels)
        == 1
    )
    predicted = "ts_handler_predictions_total"
    assert _sample(after, predicted, **labels) - _sample(before, predicted, **labels) == 1
    stage = "ts_handler_stage_seconds_count"
    assert _sample(after, stage, Stage="inference", **labels) > _sample(
        before, stage, Stage="inference", **labels
    )
    assert "ts_handler_uncertainty_bucket{" in after
    # Not on the public port, and nothing but GET /metrics on the metrics port.
    public = requests.get(f"{door.http}/metrics", headers=auth(), timeout=10)
    assert public.status_code == 404 and public.json()["kind"] == "not_found"
    other = requests.get(f"{door.metrics}/v2/health/ready", timeout=10)
    assert other.status_code == 404 and other.json()["kind"] == "not_found"


def test_the_door_refuses_a_runtime_it_does_not_know(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROXY_", "RUNTIME"))}
    env |= {"RUNTIME": "triton", "PROXY_TOKENS": str(tokens), "MAX_REQUEST_SIZE": "1024"}
    env |= {"PROXY_RUN_DIR": str(tmp_path / "run"), "PROXY_LISTEN": "127.0.0.1"}
    out = subprocess.run(
        [str(ROOT / "docker" / "proxy.sh")], env=env, capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 78 and "RUNTIME=triton" in out.stderr
