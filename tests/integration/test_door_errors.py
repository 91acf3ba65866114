"""What a client sees of TorchServe's own errors through the pod's door (docker/haproxy.cfg).

Over gRPC TorchServe 0.12 answers an unknown model or version, a request without a model name and
a full queue with INTERNAL, and every error with a Java class name on a line of its own
("org.pytorch.serve.archive.model.ModelNotFoundException"); the door rewrites them: NOT_FOUND,
INVALID_ARGUMENT, UNAVAILABLE, an `error-kind` in the trailing metadata, no class names. Over REST
its answers are {"code", "type": "<Java exception>", "message"}; the door answers {"error", "kind"}
as the handlers do. One pod (rehearsal/pod.py) of its own, with room for more requests in flight
than TorchServe's queue holds, so that queue's own refusal can be reached through the door.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
import requests

from clients import stubs
from clients.errors import BadRequest, ModelNotFound, Overloaded
from clients.grpc_client import GrpcClient
from clients.settings import ClientSettings
from clients.tokens import TokenSource
from rehearsal.pod import Pod, pod_config

pytestmark = [pytest.mark.integration, pytest.mark.serial]

TOKEN = "door-grpc-errors-token"
JAVA_NAMES = ("org.pytorch", "Exception")


@pytest.fixture(scope="module")
def pod(sentiment_archive, tmp_path_factory):
    pod = Pod(
        tmp_path_factory.mktemp("door-grpc"),
        {"sentiment": sentiment_archive},
        [TOKEN],
        pod_config("cpu"),
        proxy_env={"PROXY_MAX_INFLIGHT": "64", "PROXY_MAX_QUEUE": "64"},
    ).start()
    yield pod
    pod.drain(pre_stop=0)


def call(pod: Pod, **fields) -> grpc.RpcError:
    """A Predictions call through the door that must fail: its error."""
    pb, pb_grpc, _, _ = stubs.load()
    fields.setdefault("input", {"body": json.dumps({"text": "a fine film"}).encode()})
    with grpc.insecure_channel(pod.grpc) as channel:
        stub = pb_grpc.InferenceAPIsServiceStub(channel)
        with pytest.raises(grpc.RpcError) as e:
            stub.Predictions(
                pb.PredictionsRequest(**fields),
                metadata=[("authorization", f"Bearer {TOKEN}")],
                timeout=30,
            )
    return e.value


def kind(error: grpc.RpcError) -> str | None:
    return dict(error.trailing_metadata() or ()).get("error-kind")


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"model_name": "no_such_model"}, "Model not found: no_such_model"),
        (
            {"model_name": "sentiment", "model_version": "9.9"},
            "Model version: 9.9 does not exist for model: sentiment",
        ),
    ],
    ids=["model", "version"],
)
def test_an_unknown_model_or_version_is_not_found_without_java_names(pod, fields, reason):
    """Before: INTERNAL, 'Model not found: no_such_model' + a line naming
    org.pytorch.serve.archive.model.ModelNotFoundException."""
    error = call(pod, **fields)
    assert error.code() == grpc.StatusCode.NOT_FOUND, error.details()
    assert error.details() == reason
    assert kind(error) == "not_found"


def test_a_request_without_a_model_name_is_invalid_argument(pod):
    error = call(pod, model_name="")
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    assert error.details() == "Parameter model_name is required."
    assert kind(error) == "bad_request"


def test_the_projects_client_raises_model_not_found_and_bad_request_through_the_door(pod):
    settings = ClientSettings(grpc_target=pod.grpc, key_file=None, timeout=30)
    with GrpcClient(settings, TokenSource(keys={"inference": TOKEN})) as client:
        with pytest.raises(ModelNotFound) as missing:
            client.predict("no_such_model", {"text": "x"})
        assert (
            missing.value.status == 404 and missing.value.reason == "Model not found: no_such_model"
        )
        with pytest.raises(BadRequest):
            client.predict("", {"text": "x"})
        assert client.predict("sentiment", {"text": "a fine film"})["label"]


def worker_pids(pod: Pod) -> list[int]:
    models = requests.get(f"{pod.management}/models/sentiment", timeout=10).json()
    return [int(w["pid"]) for m in models for w in m["workers"]]


@contextlib.contextmanager
def workers_frozen(pod: Pod):
    """The model's workers stop (SIGSTOP) while TorchServe's frontend goes on queueing."""
    pids = worker_pids(pod)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def test_torchserves_full_queue_is_unavailable_overloaded_through_the_door(pod):
    """Before: INTERNAL, 'Model "sentiment" has no worker to serve inference request...' +
    'InternalServerException.()'. With the workers stopped, a batch sits in each and 16 requests in
    the queue (jobQueueSize); the door lets 64 through, so the rest meet TorchServe's own refusal."""
    settings = ClientSettings(grpc_target=pod.grpc, key_file=None, timeout=60)

    def predict(_):
        with GrpcClient(settings, TokenSource(keys={"inference": TOKEN})) as client:
            try:
                return client.predict("sentiment", {"text": "a fine film"})
            except Overloaded as e:
                return e

    with ThreadPoolExecutor(48) as pool, workers_frozen(pod):
        sent = [pool.submit(predict, i) for i in range(48)]
        time.sleep(3)
        error = call(pod, model_name="sentiment")
        refused = [f.result() for f in sent if f.done()]
    assert error.code() == grpc.StatusCode.UNAVAILABLE, error.details()
    assert error.details() == "replica full, retry" and kind(error) == "overloaded"
    assert len(refused) >= 8 and all(isinstance(r, Overloaded) for r in refused), refused
    answers = [f.result() for f in sent]  # the held ones answered once thawed, the rest refused
    assert all(isinstance(a, dict | Overloaded) for a in answers), answers
    assert sum(isinstance(a, dict) for a in answers) >= 16


def test_no_grpc_error_through_the_door_names_a_java_class(pod):
    for fields in ({"model_name": "no_such_model"}, {"model_name": ""}):
        error = call(pod, **fields)
        assert not any(name in (error.details() or "") for name in JAVA_NAMES), error.details()


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/predictions/no_such_model", "Model not found: no_such_model"),
        ("/predictions/sentiment/9.9", "Model version: 9.9 does not exist for model: sentiment"),
        ("/explanations/no_such_model", "Model not found: no_such_model"),
    ],
)
def test_an_unknown_model_or_version_over_rest_is_the_doors_json_404(pod, path, reason):
    """Before: 404 {"code": 404, "type": "ModelNotFoundException", "message": ...}."""
    r = requests.post(
        pod.http + path, json={"text": "x"}, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    rid = r.headers["X-Request-ID"]  # the door's, on the answer and in its body
    assert r.status_code == 404, r.text
    assert r.json() == {"error": reason, "kind": "not_found", "request_id": rid}, r.text


def test_torchserves_full_queue_over_rest_is_the_doors_json_503(pod):
    """Before: 503 {"code": 503, "type": "ServiceUnavailableException", "message": "Model
    \"sentiment\" has no worker to serve inference request..."}."""

    def predict(_):
        return requests.post(
            f"{pod.http}/predictions/sentiment",
            json={"text": "a fine film"},
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=60,
        )

    with ThreadPoolExecutor(48) as pool, workers_frozen(pod):
        sent = [pool.submit(predict, i) for i in range(48)]
        time.sleep(3)
        refused = [f.result() for f in sent if f.done()]
    assert len(refused) >= 8, "TorchServe's queue refused nothing"
    for r in refused:
        assert r.status_code == 503 and r.headers["Retry-After"] == "1", r.text
        assert r.json() == {
            "error": "replica full or not serving, retry",
            "kind": "overloaded",
            "request_id": r.headers["X-Request-ID"],
        }
    assert {f.result().status_code for f in sent} <= {200, 503}
