"""The pod proxy (HAProxy, docker/haproxy.cfg via docker/proxy.sh) in front of a real TorchServe.

One replica is started the pod's way (rehearsal/pod.py: entrypoint with the rendered ConfigMap,
proxy.sh, probe.py) serving the tiny sentiment archive. Timeouts and limits are shortened through
the PROXY_* variables so the attack classes of issue 15 finish in seconds; each test asserts what a
client would see, and that nothing an attacker sent reached TorchServe as a request of its own.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import grpc
import pytest
import requests
from google.protobuf import empty_pb2

from clients import stubs
from rehearsal.pod import Pod, pod_config

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TOKEN, OLD_TOKEN = "client-token-for-tests", "old-token-still-valid"
IDLE_S, REQUEST_S, SERVER_S = 3, 2, 6
MAX_INFLIGHT, MAX_QUEUE = 3, 2
PROXY_ENV = {
    "PROXY_IDLE_TIMEOUT": f"{IDLE_S}s",
    "PROXY_REQUEST_TIMEOUT": f"{REQUEST_S}s",
    "PROXY_KEEPALIVE_TIMEOUT": f"{REQUEST_S}s",
    "PROXY_QUEUE_TIMEOUT": "1s",
    "PROXY_SERVER_TIMEOUT": f"{SERVER_S}s",
    "PROXY_MAX_INFLIGHT": str(MAX_INFLIGHT),
    "PROXY_MAX_QUEUE": str(MAX_QUEUE),
    "PROXY_TOKEN_POLL": "1",
}
SERVICE = "/org.pytorch.serve.grpc.inference.InferenceAPIsService"


@pytest.fixture(scope="module")
def pod(sentiment_archive, tmp_path_factory):
    pod = Pod(
        tmp_path_factory.mktemp("pod"),
        {"sentiment": sentiment_archive},
        [OLD_TOKEN, TOKEN],
        pod_config("cpu"),
        proxy_env=PROXY_ENV,
    ).start()
    yield pod
    pod.drain(pre_stop=0)


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def access_log(pod: Pod) -> str:
    path = pod.work / "logs" / "access_log.log"
    return path.read_text(errors="replace") if path.exists() else ""


def connect(pod: Pod) -> socket.socket:
    return socket.create_connection(("127.0.0.1", pod.ports["proxy_http"]), timeout=10)


def read_all(sock: socket.socket, timeout: float = 8) -> bytes:
    """Everything the proxy sends until it closes the connection (or `timeout` passes)."""
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return data


def statuses(raw: bytes) -> list[int]:
    return [int(line.split()[1]) for line in raw.split(b"\r\n") if line.startswith(b"HTTP/1.1 ")]


def request(path: str, token: str | None = TOKEN, extra: str = "", body: bytes = b"") -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: pod\r\n"
    if token:
        head += f"Authorization: Bearer {token}\r\n"
    return (head + extra + "\r\n").encode() + body


def grpc_stub(pod: Pod):
    _, pb_grpc, _, _ = stubs.load()
    channel = grpc.insecure_channel(pod.grpc)
    return channel, pb_grpc.InferenceAPIsServiceStub(channel)


# --- valid traffic -----------------------------------------------------------------------------


@pytest.mark.parametrize("token", [TOKEN, OLD_TOKEN])
def test_rest_predictions_pass_with_either_token_of_a_rotation(pod, token):
    r = requests.post(
        f"{pod.http}/predictions/sentiment", json={"text": "a fine film"}, headers=auth(token)
    )
    assert r.status_code == 200, r.text
    assert r.json()["label"] in {"positive", "negative"}


def test_grpc_ping_and_predictions_pass_over_h2c(pod):
    pb, _, _, _ = stubs.load()
    channel, stub = grpc_stub(pod)
    with channel:
        md = [("authorization", f"Bearer {TOKEN}")]
        assert "Healthy" in stub.Ping(empty_pb2.Empty(), metadata=md, timeout=10).health
        body = json.dumps({"text": "a fine film"}).encode()
        request = pb.PredictionsRequest(model_name="sentiment", input={"body": body})
        answer = stub.Predictions(request, metadata=md, timeout=30)
        assert json.loads(answer.prediction)["label"] in {"positive", "negative"}


def test_a_token_rotation_reaches_the_proxy_without_a_restart(pod):
    pid = pod.procs["proxy"].pid
    pod.token_file.write_text(f"{TOKEN}\nrotated-in\n")
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            ok = requests.get(f"{pod.http}/ping", headers=auth("rotated-in")).status_code == 200
            if ok and requests.get(f"{pod.http}/ping", headers=auth(OLD_TOKEN)).status_code == 401:
                break
            time.sleep(0.3)
        assert requests.get(f"{pod.http}/ping", headers=auth("rotated-in")).status_code == 200
        assert requests.get(f"{pod.http}/ping", headers=auth(OLD_TOKEN)).status_code == 401
        assert pod.procs["proxy"].pid == pid and pod.procs["proxy"].poll() is None
    finally:
        pod.token_file.write_text(f"{OLD_TOKEN}\n{TOKEN}\n")
        deadline = time.monotonic() + 15
        while requests.get(f"{pod.http}/ping", headers=auth(OLD_TOKEN)).status_code != 200:
            assert time.monotonic() < deadline, "the restored tokens were not reloaded"
            time.sleep(0.3)


def test_an_emptied_secret_keeps_the_last_good_tokens(pod):
    pod.token_file.write_text("\n")
    try:
        time.sleep(2.5)  # two polls: the proxy has read the empty file and kept what it had
        assert requests.get(f"{pod.http}/ping", headers=auth()).status_code == 200
        assert "no client token" in (pod.root / "proxy.log").read_text()
    finally:
        pod.token_file.write_text(f"{OLD_TOKEN}\n{TOKEN}\n")


def test_the_proxy_refuses_to_start_without_a_token(tmp_path):
    empty = tmp_path / "tokens"
    empty.write_text("")
    env = os.environ | {"PROXY_TOKENS": str(empty), "PROXY_RUN_DIR": str(tmp_path / "run")}
    env |= {"MAX_REQUEST_SIZE": "1024", "PROXY_LISTEN": "127.0.0.1"}
    out = subprocess.run(
        [str(ROOT / "docker/proxy.sh")], env=env, capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 1 and "no client token" in out.stderr


# --- authentication ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": TOKEN},  # no scheme
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": f"Bearer {TOKEN[:-1]}"},
    ],
)
def test_requests_without_a_valid_token_get_a_json_401(pod, headers):
    r = requests.post(f"{pod.http}/predictions/sentiment", json={"text": "x"}, headers=headers)
    assert r.status_code == 401 and r.json()["kind"] == "unauthorized"
    assert r.headers["WWW-Authenticate"] == "Bearer"


def test_two_authorization_headers_are_refused(pod):
    with connect(pod) as s:
        s.sendall(request("/ping", extra=f"Authorization: Bearer {TOKEN}\r\nContent-Length: 0\r\n"))
        assert statuses(read_all(s, 5))[:1] == [401]


def test_grpc_without_a_valid_token_is_unauthenticated_and_other_services_unimplemented(pod):
    channel, stub = grpc_stub(pod)
    with channel:
        for md in ([], [("authorization", "Bearer wrong")]):
            with pytest.raises(grpc.RpcError) as e:
                stub.Ping(empty_pb2.Empty(), metadata=md, timeout=10)
            assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        management = channel.unary_unary(
            "/org.pytorch.serve.grpc.management.ManagementAPIsService/ListModels"
        )
        with pytest.raises(grpc.RpcError) as e:
            management(b"", metadata=[("authorization", f"Bearer {TOKEN}")], timeout=10)
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED


# --- desynchronisation -------------------------------------------------------------------------

# The attacker's body is the start of a request whose last header swallows the victim's next
# request line, so the victim's Authorization would complete it (issue 15's smuggling).
SMUGGLED = b"GET /smuggled-by-attacker HTTP/1.1\r\nHost: pod\r\nX-Swallow: "
VICTIM = request("/ping", extra="Content-Length: 0\r\n").replace(b"POST", b"GET", 1)


@pytest.mark.parametrize(
    ("name", "attack", "status"),
    [
        ("401", request("/ping", None, f"Content-Length: {len(SMUGGLED)}\r\n", SMUGGLED), 401),
        (
            "411",
            request(
                "/ping",
                extra="Transfer-Encoding: chunked\r\n",
                body=b"%x\r\n%s\r\n0\r\n\r\n" % (len(SMUGGLED), SMUGGLED),
            ),
            411,
        ),
        ("413", request("/ping", extra="Content-Length: 99999999\r\n", body=SMUGGLED), 413),
    ],
)
def test_an_early_error_never_runs_the_unread_body_as_the_next_request(pod, name, attack, status):
    with connect(pod) as s:
        s.sendall(attack)
        time.sleep(0.3)
        s.sendall(VICTIM)
        answers = statuses(read_all(s))
    assert answers[0] == status, name
    # The victim's request is either answered as itself or, where the body could not be drained,
    # refused with the connection; it is never merged with the attacker's bytes.
    assert answers[1:] in ([], [200]), f"{name}: {answers}"
    assert "smuggled-by-attacker" not in access_log(pod)


@pytest.mark.parametrize(
    "lengths",
    [
        ["5", "6"],  # duplicate, different
        ["-1"],
        ["abc"],
        ["5, 6"],
        ["99999999999999999999999"],
    ],
)
def test_malformed_content_length_is_a_400_and_the_connection_closes(pod, lengths):
    extra = "".join(f"Content-Length: {v}\r\n" for v in lengths)
    with connect(pod) as s:
        s.sendall(request("/predictions/sentiment", extra=extra, body=SMUGGLED))
        time.sleep(0.3)
        with_victim = True
        try:
            s.sendall(VICTIM)
        except (BrokenPipeError, ConnectionResetError):
            with_victim = False
        raw = read_all(s)
    assert statuses(raw) == [400], f"{lengths}: {raw[:300]!r} (victim sent: {with_victim})"
    assert "smuggled-by-attacker" not in access_log(pod)
    r = requests.get(f"{pod.http}/ping", headers=auth())
    assert r.status_code == 200, "the proxy still serves everyone else"


def test_content_length_with_chunked_is_refused_not_guessed(pod):
    extra = "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n"
    body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(SMUGGLED), SMUGGLED)
    with connect(pod) as s:
        s.sendall(request("/ping", extra=extra, body=body) + VICTIM)
        answers = statuses(read_all(s))
    assert answers and answers[0] in (400, 411) and 404 not in answers
    assert "smuggled-by-attacker" not in access_log(pod)


# --- slow and idle connections -----------------------------------------------------------------


def test_slow_headers_are_cut_with_408_while_others_are_served(pod):
    with connect(pod) as s:
        start = time.monotonic()
        s.sendall(b"POST /predictions/sentiment HTTP/1.1\r\nHost: pod\r\n")
        for _ in range(3):  # a header byte now and then never resets the header timeout
            time.sleep(0.5)
            r = requests.get(f"{pod.http}/ping", headers=auth())
            assert r.status_code == 200
            s.sendall(b"X")
        raw = read_all(s, REQUEST_S + 5)
        elapsed = time.monotonic() - start
    assert statuses(raw) == [408] and elapsed < REQUEST_S + 4


def test_a_stalled_body_is_cut_and_never_reaches_torchserve(pod):
    before = access_log(pod).count("/predictions/stalled")
    with connect(pod) as s:
        s.sendall(request("/predictions/stalled", extra="Content-Length: 100\r\n", body=b"{"))
        raw = read_all(s, REQUEST_S + IDLE_S + 5)
    assert statuses(raw)[:1] in ([408], [])  # 408 where HAProxy may still answer, else a close
    assert access_log(pod).count("/predictions/stalled") == before


def test_idle_keepalive_connections_are_closed_and_hold_nothing(pod):
    idle = [connect(pod) for _ in range(50)]
    try:
        for s in idle[:25]:  # half of them after one request, half before any
            s.sendall(VICTIM)
        r = requests.get(f"{pod.http}/ping", headers=auth(), timeout=5)
        assert r.status_code == 200, "50 idle connections must not block anyone"
        closed_by = time.monotonic() + REQUEST_S + 5
        for s in idle:
            s.settimeout(max(0.1, closed_by - time.monotonic()))
            data = read_all(s, max(0.1, closed_by - time.monotonic()))
            assert statuses(data) in ([200], [], [408]), data[:200]
            s.settimeout(0.1)
            assert s.recv(1) == b"", "still open after the keep-alive/request timeout"
    finally:
        for s in idle:
            s.close()


# --- limits ------------------------------------------------------------------------------------


def hold_rest_slot(pod: Pod) -> socket.socket:
    """A request whose body is larger than the proxy buffers: the first buffer goes upstream and
    the rest never comes, so it holds one in-flight slot at TorchServe until the idle timeout."""
    s = connect(pod)
    s.sendall(
        request("/predictions/sentiment", extra="Content-Length: 200000\r\n", body=b"x" * 40000)
    )
    return s


def test_a_full_replica_answers_a_fast_json_503_and_recovers(pod):
    held = [hold_rest_slot(pod) for _ in range(MAX_INFLIGHT + MAX_QUEUE)]
    try:
        time.sleep(0.5)
        start = time.monotonic()
        r = requests.post(
            f"{pod.http}/predictions/sentiment", json={"text": "x"}, headers=auth(), timeout=10
        )
        assert r.status_code == 503 and r.json()["kind"] == "overloaded"
        assert r.headers["Retry-After"] == "1" and time.monotonic() - start < 3
    finally:
        for s in held:
            s.close()
    deadline = time.monotonic() + IDLE_S + 5
    while (r := requests.get(f"{pod.http}/ping", headers=auth())).status_code != 200:
        assert time.monotonic() < deadline, r.text
        time.sleep(0.3)


def test_idle_grpc_streams_are_bounded_cut_and_never_block_authentication(pod):
    channel, stub = grpc_stub(pod)
    md = [("authorization", f"Bearer {TOKEN}")]
    silent = threading.Event()

    def never_send():
        silent.wait(30)
        return
        yield

    with channel:
        streams = [
            stub.StreamPredictions2(never_send(), metadata=md, timeout=30)
            for _ in range(MAX_INFLIGHT + MAX_QUEUE + 2)
        ]
        time.sleep(0.5)
        start = time.monotonic()
        # While the replica is full of silent streams: callers without a token are answered at
        # once, callers with one get a fast UNAVAILABLE (a client retries another replica).
        with pytest.raises(grpc.RpcError) as e:
            stub.Ping(empty_pb2.Empty(), timeout=10)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as e:
            stub.Ping(empty_pb2.Empty(), metadata=md, timeout=10)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
        assert time.monotonic() - start < 4
        # The silent streams are cut at the server timeout (the proxy cannot tell a silent stream
        # from a slow inference, so it is above default_response_timeout in a pod), and the
        # replica serves again.
        codes = set()
        for stream in streams:
            with pytest.raises(grpc.RpcError) as e:
                next(stream)
            codes.add(e.value.code())
        assert time.monotonic() - start < SERVER_S + 3, codes
        silent.set()
        assert "Healthy" in stub.Ping(empty_pb2.Empty(), metadata=md, timeout=10).health
