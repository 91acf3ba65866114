"""Locust users for the rehearsal: REST and gRPC predictions through the balancer, of the model
REHEARSAL_MODEL with the bodies its `light_request` hook builds (tools/registry.py). With
REHEARSAL_RUNTIME=oip (replicas serving the Open Inference Protocol) the REST users send the same
bodies as the protocol's inference requests, and there are no gRPC users.

Every request's outcome goes to REHEARSAL_LOG (one JSON line: start, end, protocol, ok, error,
replica), so the rehearsal can count what was lost around each event it caused.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # locust puts only this folder on sys.path
    sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402
import grpc.experimental.gevent as grpc_gevent  # noqa: E402
from locust import HttpUser, User, constant_pacing, events, task  # noqa: E402

from clients import stubs  # noqa: E402
from deploy.rollout import oip_encode, oip_request  # noqa: E402
from tools.registry import MODELS, get  # noqa: E402

grpc_gevent.init_gevent()  # grpc's C core must yield to gevent

TOKEN = os.environ.get("REHEARSAL_TOKEN", "")
PACING_S = float(os.environ.get("REHEARSAL_PACING_S", "0.2"))
MODEL = os.environ.get("REHEARSAL_MODEL") or next(
    m.name for m in MODELS if m.samples().light_request
)
light_request = get(MODEL).samples().light_request
RUNTIME = os.environ.get("REHEARSAL_RUNTIME") or "torchserve"
"""What the replicas serve: TorchServe (REST and gRPC users), or the Open Inference Protocol server
(REST users, the same bodies as tensors to /v2/models/<model>/infer)."""
_log = open(os.environ.get("REHEARSAL_LOG", os.devnull), "a", buffering=1)  # noqa: SIM115


@events.request.add_listener
def _record(request_type, name, response_time, response=None, exception=None, context=None, **_):
    end = time.time()
    replica = (context or {}).get("replica")
    if replica is None and response is not None:
        replica = response.headers.get("X-Replica")
    entry = {
        "start": end - response_time / 1000,
        "end": end,
        "type": request_type,
        "ok": exception is None,
        "error": None if exception is None else str(exception)[:200],
        "replica": replica,
    }
    _log.write(json.dumps(entry) + "\n")


class RestUser(HttpUser):
    weight = 2
    wait_time = constant_pacing(PACING_S)

    @task
    def predict(self) -> None:
        body = light_request(int(time.time() * 1000))
        oip = RUNTIME == "oip"
        data, kind = (
            oip_encode(oip_request(body, MODEL)) if oip else (json.dumps(body).encode(), {})
        )
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        with self.client.post(
            f"/v2/models/{MODEL}/infer" if oip else f"/predictions/{MODEL}",
            data=data,
            headers=headers | kind,
            name=MODEL,
            catch_response=True,
        ) as r:
            if r.status_code != 200:
                r.failure(f"HTTP {r.status_code}: {r.text[:120]}")


class GrpcUser(User):
    abstract = RUNTIME == "oip"  # the TorchServe gRPC API only
    weight = 1
    wait_time = constant_pacing(PACING_S)

    def on_start(self) -> None:
        self.pb, pb_grpc, _, _ = stubs.load()
        self.channel = grpc.insecure_channel(os.environ["REHEARSAL_GRPC"])
        self.stub = pb_grpc.InferenceAPIsServiceStub(self.channel)

    def on_stop(self) -> None:
        self.channel.close()

    @task
    def predict(self) -> None:
        body = json.dumps(light_request(int(time.time() * 1000))).encode()
        request = self.pb.PredictionsRequest(model_name=MODEL, input={"body": body})
        start, error, replica, size = time.perf_counter(), None, None, 0
        try:
            answer, call = self.stub.Predictions.with_call(
                request, metadata=[("authorization", f"Bearer {TOKEN}")], timeout=30
            )
            replica = dict(call.initial_metadata()).get("x-replica")
            size = len(answer.prediction)
        except grpc.RpcError as e:
            error = RuntimeError(f"gRPC {e.code().name}: {e.details()}")
        events.request.fire(
            request_type="GRPC",
            name=MODEL,
            response_time=(time.perf_counter() - start) * 1000,
            response_length=size,
            exception=error,
            context={"replica": replica},
        )
