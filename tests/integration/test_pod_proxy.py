"""The pod proxy (HAProxy, docker/haproxy.cfg via docker/proxy.sh) in front of a real TorchServe.

One replica is started the pod's way (rehearsal/pod.py: entrypoint with the rendered ConfigMap,
proxy.sh, probe.py) serving the tiny sentiment archive. Timeouts and limits are shortened through
the PROXY_* variables so the attack classes below (smuggling, slow clients, floods) finish in seconds; each test asserts what a
client would see, and that nothing an attacker sent reached TorchServe as a request of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
import requests
from google.protobuf import empty_pb2

from clients import stubs
from rehearsal.pod import Pod, pod_config
from reliability import flood
from reliability.flood import closed_at_once, open_idle, slow_upload

pytestmark = [pytest.mark.integration, pytest.mark.serial]

ROOT = Path(__file__).resolve().parents[2]
TOKEN, OLD_TOKEN = "client-token-for-tests", "old-token-still-valid"
IDLE_S, REQUEST_S, SERVER_S = 3, 2, 6
MAX_INFLIGHT, MAX_QUEUE = 3, 2
PER_SOURCE = 600
PROXY_ENV = {
    "PROXY_IDLE_TIMEOUT": f"{IDLE_S}s",
    "PROXY_REQUEST_TIMEOUT": f"{REQUEST_S}s",
    "PROXY_KEEPALIVE_TIMEOUT": f"{REQUEST_S}s",
    "PROXY_QUEUE_TIMEOUT": "1s",
    "PROXY_SERVER_TIMEOUT": f"{SERVER_S}s",
    "PROXY_MAX_INFLIGHT": str(MAX_INFLIGHT),
    "PROXY_MAX_QUEUE": str(MAX_QUEUE),
    "PROXY_MAX_CONN_PER_SOURCE": str(PER_SOURCE),
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


def test_the_pods_workers_listen_in_its_own_temp_dir(pod):
    """TorchServe names a worker's socket `<java.io.tmpdir>/.ts.sock.<port>` from the port alone,
    and a starting worker deletes whatever file is there: two servers on one host with the
    default java.io.tmpdir (/tmp) and port (9000), such as `make rehearse`'s two replicas or a pod
    beside `make serve`, take each other's worker sockets. Each pod's live in a folder of its own."""
    log = (pod.work / "logs" / "model_log.log").read_text()
    sockets = [Path(p) for p in re.findall(r"Listening on port: (\S+)", log)]
    assert sockets
    assert {s.parent for s in sockets} == {pod.java_tmp}
    assert pod.java_tmp != Path("/tmp") and all(s.is_socket() for s in sockets)


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def access_log(pod: Pod) -> str:
    path = pod.work / "logs" / "access_log.log"
    return path.read_text(errors="replace") if path.exists() else ""


def connect(pod: Pod, source: str = "127.0.0.1", port: str = "proxy_http") -> socket.socket:
    """A connection to the proxy from `source` (another client to HAProxy's per-source counters)."""
    return flood.connect(pod.ports[port], source)


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
# request line, so the victim's Authorization would complete it (request smuggling).
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


@contextlib.contextmanager
def torchserve_frozen(pod: Pod):
    """TorchServe stops answering (SIGSTOP to its process group) while the proxy goes on: every
    request forwarded now holds an in-flight slot until it is thawed."""
    group = os.getpgid(pod.procs["torchserve"].pid)
    os.killpg(group, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(group, signal.SIGCONT)


def wait_serving(pod: Pod, within: float) -> None:
    deadline = time.monotonic() + within
    while (r := requests.get(f"{pod.http}/ping", headers=auth())).status_code != 200:
        assert time.monotonic() < deadline, r.text
        time.sleep(0.3)


def predict(pod: Pod, timeout: float = 30) -> requests.Response:
    return requests.post(
        f"{pod.http}/predictions/sentiment", json={"text": "x"}, headers=auth(), timeout=timeout
    )


def test_explanations_pass_the_door(pod):
    """The one route added to the allow-list: /explanations/<model> reaches the handler, which
    answers word attributions over the same body as /predictions."""
    r = requests.post(
        f"{pod.http}/explanations/sentiment",
        json={"text": "a fine film"},
        headers=auth(),
        timeout=30,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert [w["text"] for w in body["words"]] == ["a", "fine", "film"]


def test_explanations_beyond_their_door_get_a_fast_503(pod):
    """Explanations have their own in-flight cap at the door (2 by default): a third is refused in
    milliseconds, not after waiting its turn in TorchServe's queue; predictions still pass."""

    def explain(timeout: float = 30) -> requests.Response:
        return requests.post(
            f"{pod.http}/explanations/sentiment",
            json={"text": "x"},
            headers=auth(),
            timeout=timeout,
        )

    with torchserve_frozen(pod), ThreadPoolExecutor(3) as pool:
        held = [pool.submit(explain) for _ in range(3)]  # 2 in flight, 1 waiting 100 ms
        time.sleep(0.5)
        start = time.monotonic()
        r = explain(timeout=10)
        assert r.status_code == 503 and r.json()["kind"] == "overloaded", r.text
        assert r.headers["Retry-After"] == "1" and time.monotonic() - start < 1
    assert [f.result().status_code for f in held].count(503) >= 1  # the one past the queue
    assert predict(pod).status_code == 200


def grpc_explain(pod: Pod, timeout: float = 30):
    """One gRPC explanation (the `explain` input beside the body), its answer or its RpcError."""
    pb, _, _, _ = stubs.load()
    channel, stub = grpc_stub(pod)
    with channel:
        body = json.dumps({"text": "a fine film"}).encode()
        req = pb.PredictionsRequest(
            model_name="sentiment", input={"body": body, "explain": b"true"}
        )
        try:
            return stub.Predictions(
                req, metadata=[("authorization", f"Bearer {TOKEN}")], timeout=timeout
            )
        except grpc.RpcError as e:
            return e


def test_grpc_explanations_share_the_explanation_limit_at_the_door(pod):
    """gRPC explanations (an input inside the message) are counted with REST /explanations: with
    one of each in flight, a third of either protocol is refused in milliseconds, not queued in
    TorchServe; gRPC predictions are not held to that limit."""
    rest = lambda timeout=30: requests.post(  # noqa: E731
        f"{pod.http}/explanations/sentiment", json={"text": "x"}, headers=auth(), timeout=timeout
    )
    deadline = time.monotonic() + 10  # a test before may have left the door's checks down
    while (ready := rest()).status_code != 200:
        assert time.monotonic() < deadline, ready.text
        time.sleep(0.3)
    with ThreadPoolExecutor(4) as pool:
        with torchserve_frozen(pod):
            held = [pool.submit(rest), pool.submit(grpc_explain, pod)]
            time.sleep(0.5)
            start = time.monotonic()
            refused = grpc_explain(pod, timeout=10)
            assert isinstance(refused, grpc.RpcError), refused
            assert refused.code() == grpc.StatusCode.UNAVAILABLE, refused.details()
            assert "explanations are busy" in refused.details()
            r = rest(timeout=10)
            assert r.status_code == 503 and r.json()["kind"] == "overloaded", r.text
            assert time.monotonic() - start < 2
            # Not explanations: forwarded to TorchServe, answered once it is thawed.
            predictions = [pool.submit(predict, pod) for _ in range(2)]
            time.sleep(0.3)
        assert [f.result().status_code for f in predictions] == [200, 200]
    assert held[0].result().status_code == 200, held[0].result().text
    answer = held[1].result()
    assert not isinstance(answer, grpc.RpcError), answer.details()
    assert [w["text"] for w in json.loads(answer.prediction)["words"]] == ["a", "fine", "film"]


def test_a_full_replica_answers_a_fast_json_503_and_recovers(pod):
    with torchserve_frozen(pod), ThreadPoolExecutor(MAX_INFLIGHT + MAX_QUEUE) as pool:
        held = [pool.submit(predict, pod) for _ in range(MAX_INFLIGHT + MAX_QUEUE)]
        time.sleep(0.5)
        start = time.monotonic()
        r = predict(pod, timeout=10)
        assert r.status_code == 503 and r.json()["kind"] == "overloaded"
        assert r.headers["Retry-After"] == "1" and time.monotonic() - start < 3
    for f in held:
        assert f.result().status_code in (200, 503, 504)
    wait_serving(pod, IDLE_S + 5)


def test_slow_bodies_are_held_at_the_door_and_never_take_a_torchserve_slot(pod):
    """More slow uploads than the replica has slots: each sends 40 kB of a
    200 kB body, then a byte now and then. Before, each took an in-flight slot and everyone else got
    503; now the body is buffered at the proxy, cut with 408 when its time is up, and never sent."""
    slow = [
        slow_upload(pod.ports["proxy_http"], TOKEN, "/predictions/slow-body")
        for _ in range(MAX_INFLIGHT + MAX_QUEUE + 5)
    ]
    try:
        for _ in range(3):
            time.sleep(0.4)
            assert predict(pod, timeout=10).status_code == 200
            for s in slow:
                with contextlib.suppress(OSError):
                    s.sendall(b"x")
        for s in slow:
            raw = read_all(s, REQUEST_S + 3)
            assert statuses(raw) in ([408], []), raw[:200]
    finally:
        for s in slow:
            s.close()
    assert "/predictions/slow-body" not in access_log(pod)


def test_idle_sockets_never_deny_authenticated_requests(pod):
    """Issue 22, item 6: 520 silent connections made every authenticated request a 503, 1,030 made
    them time out. Silent sockets are not work: 1,100 of them (from two other addresses, under the
    per-source cap) leave REST and gRPC answering at once, and are closed by the header timeout."""
    idle = open_idle(pod.ports["proxy_http"], 550, first_source=2)
    idle += open_idle(pod.ports["proxy_grpc"], 550, first_source=3)
    try:
        assert len(idle) == 1100
        start = time.monotonic()
        assert predict(pod, timeout=5).status_code == 200
        channel, stub = grpc_stub(pod)
        with channel:
            md = [("authorization", f"Bearer {TOKEN}")]
            assert "Healthy" in stub.Ping(empty_pb2.Empty(), metadata=md, timeout=5).health
        assert time.monotonic() - start < 3
        time.sleep(REQUEST_S + IDLE_S + 1)
        assert closed_at_once(idle) == len(idle), "silent sockets outlived the timeouts"
    finally:
        for s in idle:
            s.close()


def test_one_source_cannot_take_every_socket(pod):
    flood, refused = [], 0
    for _ in range(PER_SOURCE + 100):
        try:
            flood.append(connect(pod, "127.0.0.4"))
        except OSError:  # reset during the handshake: refused at accept
            refused += 1
    try:
        time.sleep(0.3)
        refused += closed_at_once(flood)
        assert refused >= 100, "connections over the per-source cap were accepted"
        assert predict(pod, timeout=5).status_code == 200  # from another address: served
    finally:
        for s in flood:
            s.close()


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("POST", "/v1/models/sentiment:explain", 404),
        ("POST", "/v2/models/sentiment/explain", 404),
        ("POST", "/v2/models/sentiment/infer", 404),
        ("POST", "/invocations", 404),
        ("POST", "/models/sentiment/invoke", 404),
        ("GET", "/api-description", 404),
        ("OPTIONS", "/", 404),
        ("GET", "/metrics", 404),
        ("GET", "/models", 404),
        ("POST", "/predictions/sentiment/1.0/extra", 404),
        ("POST", "/predictions/../explanations/sentiment", 404),
        ("POST", "/explanations/sentiment/1.0/extra", 404),
        ("GET", "/explanations/sentiment", 405),
        ("POST", "/predictions/%2e%2e/explanations", 404),
        ("GET", "/predictions/sentiment", 405),
        ("DELETE", "/predictions/sentiment", 405),
        ("POST", "/ping", 405),
    ],
)
def test_only_the_documented_rest_surface_passes_the_door(pod, method, path, status):
    marker = secrets.token_hex(8)  # the query is not part of the path the allow-list reads
    with connect(pod) as s:
        head = request(f"{path}?door={marker}", extra="Content-Length: 2\r\n", body=b"{}")
        s.sendall(head.replace(b"POST", method.encode(), 1))
        raw = read_all(s, 3)
    assert statuses(raw)[:1] == [status], raw[:300]
    body = raw.split(b"\r\n\r\n", 1)[1]
    assert json.loads(body)["kind"] == ("not_found" if status == 404 else "method_not_allowed")
    assert marker not in access_log(pod), "a refused request reached TorchServe"


@pytest.mark.parametrize(
    "method",
    [
        "StreamPredictions",
        "StreamPredictions2",
        "NoSuchMethod",
    ],
)
def test_only_the_unary_inference_rpcs_pass_the_door(pod, method):
    """TorchServe 0.12 kills the worker after a StreamPredictions answer without ts_stream_next;
    at the door streaming RPCs are not served at all."""
    pb, _, _, _ = stubs.load()
    channel, _ = grpc_stub(pod)
    with channel:
        call = channel.unary_stream(f"{SERVICE}/{method}")
        body = json.dumps({"text": "a fine film"}).encode()
        req = pb.PredictionsRequest(model_name="sentiment", input={"body": body})
        start = time.monotonic()
        with pytest.raises(grpc.RpcError) as e:
            list(
                call(
                    req.SerializeToString(),
                    metadata=[("authorization", f"Bearer {TOKEN}")],
                    timeout=10,
                )
            )
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert time.monotonic() - start < 2


def test_a_grpc_request_over_max_request_size_is_resource_exhausted(pod):
    """What docs/clients.md promises for a 413 over gRPC (TorchServe itself cancels the call)."""
    pb, _, _, _ = stubs.load()
    channel, stub = grpc_stub(pod)
    with channel:
        body = json.dumps({"text": "x" * 1_100_000}).encode()
        req = pb.PredictionsRequest(model_name="sentiment", input={"body": body})
        with pytest.raises(grpc.RpcError) as e:
            stub.Predictions(req, metadata=[("authorization", f"Bearer {TOKEN}")], timeout=15)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value.details()
        assert "max_request_size" in e.value.details()


def test_the_metrics_port_serves_get_metrics_and_nothing_else(pod):
    """TorchServe's metrics listener also answers /api-description: it stays on loopback, and the
    proxy passes GET /metrics only (no token, as Prometheus scrapes)."""
    url = f"http://127.0.0.1:{pod.ports['proxy_metrics']}"
    assert predict(pod).status_code == 200  # the frontend's counters exist from the first request
    r = requests.get(f"{url}/metrics", timeout=10)
    assert r.status_code == 200 and "ts_inference_requests_total" in r.text
    for method, path in [("GET", "/api-description"), ("OPTIONS", "/"), ("POST", "/metrics")]:
        r = requests.request(method, url + path, timeout=10)
        assert r.status_code == 404 and r.json()["kind"] == "not_found", (method, path)


# --- request ids -------------------------------------------------------------------------------


def wait_for_line(path: Path, needle: str, within: float = 10) -> str:
    """The first line of `path` that holds `needle` (logs are written a moment after the answer)."""
    deadline = time.monotonic() + within
    while True:
        text = path.read_text(errors="replace") if path.exists() else ""
        found = [line for line in text.splitlines() if needle in line]
        if found:
            return found[0]
        assert time.monotonic() < deadline, f"{needle} not in {path.name}"
        time.sleep(0.2)


def test_one_failing_request_is_followed_by_its_id_through_the_door_and_the_worker(pod):
    """A client's X-Request-ID is the id of its request everywhere: the answer's header, the error
    body, the door's log line, TorchServe's access log line and the worker's log line of the
    refusal. TorchServe's access log format is fixed in its Java (the request line, no header), so
    the door appends the id to the query as `x-request-id` (percent-encoded)."""
    rid = f"trace-{secrets.token_hex(6)}+1"  # '+' is percent-encoded in the request line
    r = requests.post(
        f"{pod.http}/predictions/sentiment",
        json={"text": "   "},  # refused by the handler: empty_input, 400
        headers=auth() | {"X-Request-ID": rid},
        timeout=30,
    )
    assert r.status_code == 400 and r.headers["X-Request-ID"] == rid, r.text
    assert r.json() == {"error": r.json()["error"], "kind": "empty_input", "request_id": rid}
    door_line = wait_for_line(pod.root / "proxy.log", f"request_id={rid}")
    assert " 400 " in door_line and "POST /predictions/sentiment" in door_line
    worker_line = wait_for_line(pod.work / "logs" / "model_log.log", rid)
    record = json.loads(worker_line[worker_line.index("{") :])
    assert record["event"] == "request_refused" and record["request_id"] == rid
    assert record["reason"] == "empty_input"
    frontend_line = wait_for_line(pod.work / "logs" / "access_log.log", rid.replace("+", "%2B"))
    assert f'"POST /predictions/sentiment?x-request-id={rid.replace("+", "%2B")} HTTP/1.1" 400' in (
        frontend_line
    )


def test_a_clients_own_request_id_parameter_is_replaced_by_the_doors(pod):
    """The request line in TorchServe's access log holds the door's id only: a client's own
    `x-request-id` query parameters are dropped, its other parameters kept, and the answer is the
    one the plain request gets (TorchServe gives a worker no query parameter of /predictions)."""
    review = {"text": "A wonderful, moving film."}
    plain = requests.post(
        f"{pod.http}/predictions/sentiment", json=review, headers=auth(), timeout=30
    )
    rid = f"query-{secrets.token_hex(4)}"
    forged = requests.post(
        f"{pod.http}/predictions/sentiment?x-request-id=forged&keep=1&x-request-id=forged2",
        json=review,
        headers=auth() | {"X-Request-ID": rid},
        timeout=30,
    )
    assert plain.status_code == 200 and forged.status_code == 200, forged.text
    assert forged.json()["probabilities"] == plain.json()["probabilities"]
    line = wait_for_line(pod.work / "logs" / "access_log.log", rid)
    assert f"/predictions/sentiment?keep=1&x-request-id={rid} " in line and "forged" not in line


@pytest.mark.parametrize(
    "sent",
    [None, "has space", "x" * 129, "caf\u00e9".encode().decode("latin-1")],
    ids=["none", "space", "too-long", "not-ascii"],
)
def test_a_missing_or_unacceptable_request_id_is_replaced_by_the_doors_own(pod, sent):
    headers = auth() if sent is None else auth() | {"X-Request-ID": sent}
    r = requests.post(
        f"{pod.http}/predictions/sentiment", json={"text": ""}, headers=headers, timeout=30
    )
    rid = r.headers["X-Request-ID"]
    assert rid != sent and re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", rid), rid
    assert r.status_code == 400 and r.json()["request_id"] == rid  # the worker got the door's
    record = wait_for_line(pod.work / "logs" / "model_log.log", rid)
    assert '"request_id": "' + rid in record


def test_the_doors_own_answers_carry_the_request_id(pod):
    rid = f"door-{secrets.token_hex(4)}"
    for method, path, headers, status in [
        ("POST", "/predictions/sentiment", {}, 401),
        ("GET", "/models", auth(), 404),
        ("GET", "/predictions/sentiment", auth(), 405),
    ]:
        r = requests.request(
            method, pod.http + path, headers=headers | {"X-Request-ID": rid}, timeout=10
        )
        assert r.status_code == status and r.headers["X-Request-ID"] == rid, r.text
        assert r.json()["request_id"] == rid
    assert wait_for_line(pod.root / "proxy.log", f"request_id={rid}")
    ok = requests.get(f"{pod.http}/ping", headers=auth() | {"X-Request-ID": rid}, timeout=10)
    assert ok.status_code == 200 and ok.headers["X-Request-ID"] == rid


def test_the_projects_client_reports_the_doors_413_as_413_with_its_request_id(pod):
    """Before: the kind decided the status, and the door's `413 too_large` reached a user as
    `400 BadRequest` (too_large being the model's own 400)."""
    from clients.errors import PayloadTooLarge
    from clients.rest_client import RestClient
    from clients.settings import ClientSettings
    from clients.tokens import TokenSource

    settings = ClientSettings(inference_url=pod.http, key_file=None, timeout=30)
    client = RestClient(settings, TokenSource(keys={"inference": TOKEN}))
    with pytest.raises(PayloadTooLarge) as e:
        client.predict("sentiment", {"text": "x" * 1_100_000})
    assert e.value.status == 413 and e.value.kind == "too_large", e.value
    assert e.value.request_id and "max_request_size" in e.value.reason


def test_a_grpc_refusal_at_the_door_carries_its_kind_and_request_id(pod):
    channel, stub = grpc_stub(pod)
    with channel, pytest.raises(grpc.RpcError) as e:
        stub.Ping(empty_pb2.Empty(), metadata=[("x-request-id", "grpc-trace-1")], timeout=10)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    trailing = dict(e.value.trailing_metadata() or ())
    assert trailing["error-kind"] == "unauthorized" and trailing["x-request-id"] == "grpc-trace-1"
