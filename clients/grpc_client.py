"""The gRPC side of `ModelClient`: TorchServe's InferenceAPIsService and ManagementAPIsService.

The body goes in the request's `input["body"]` (what a handler reads as `data[i]["body"]`), the
token as `authorization: Bearer <key>` metadata. A handler that marks one request of a batch bad
(`context.set_response_status(400, ...)`) still gets gRPC status OK here, with the error JSON as
the prediction: the body is checked, so that case raises the same BadRequest as over REST.
"""

from __future__ import annotations

import json
from typing import Any

import grpc
from google.protobuf import empty_pb2

from clients import stubs
from clients.client import Payload, decode_answer, encode_payload, with_token
from clients.errors import (
    AUTH_EXCEPTION,
    AuthError,
    ClientError,
    ConnectionFailed,
    TimedOut,
    error_for,
    from_body,
)
from clients.settings import ClientSettings
from clients.tokens import TokenSource, bearer
from handlers.errors import REQUEST_ID_HEADER

# gRPC status → the HTTP status TorchServe meant (its GRPCUtils mapping, inverted).
_HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 413,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.UNIMPLEMENTED: 501,
}
# Over gRPC TorchServe reports some REST statuses as INTERNAL: the exception class says which.
_HTTP_STATUS_BY_EXCEPTION = {
    "ModelNotFoundException": 404,
    "ModelVersionNotFoundException": 404,
    "ServiceUnavailableException": 503,
    "BadRequestException": 400,
}
_FULL_QUEUE = "has no worker to serve inference request"
"""TorchServe's message for a full queue (its REST 503 ServiceUnavailableException), which its gRPC
API sends as INTERNAL with the class line "InternalServerException.()"."""
KIND_METADATA = "error-kind"
"""Trailing metadata the pod proxy (docker/haproxy.cfg) adds to the errors it writes or rewrites:
the REST answers' "kind" (not_found, bad_request, overloaded), its class lines being gone."""
_MAX_MESSAGE = 64 * 1024 * 1024
_CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", _MAX_MESSAGE),
    ("grpc.max_receive_message_length", _MAX_MESSAGE),
]


class GrpcClient:
    protocol = "grpc"

    def __init__(self, settings: ClientSettings, tokens: TokenSource):
        self.settings = settings
        self.tokens = tokens
        self._pb, pb_grpc, self._mpb, mpb_grpc = stubs.load()
        self._channel = grpc.insecure_channel(settings.grpc_target, options=_CHANNEL_OPTIONS)
        self._mchannel = grpc.insecure_channel(
            settings.grpc_management_target, options=_CHANNEL_OPTIONS
        )
        self._inference = pb_grpc.InferenceAPIsServiceStub(self._channel)
        self._management = mpb_grpc.ManagementAPIsServiceStub(self._mchannel)

    def predict(self, model: str, payload: Payload, version: str | None = None) -> Any:
        return self._call_predictions(model, payload, version, {})

    def explain(self, model: str, payload: Payload, version: str | None = None) -> Any:
        """The same body as `predict`, explained: TorchServe 0.12's gRPC API has no explanations
        RPC, so the request carries an input named "explain" (handlers/service.py)."""
        return self._call_predictions(model, payload, version, {"explain": b"true"})

    def _call_predictions(
        self, model: str, payload: Payload, version: str | None, extra: dict[str, bytes]
    ) -> Any:
        body, _ = encode_payload(payload)
        request = self._pb.PredictionsRequest(
            model_name=model, model_version=version or "", input={"body": body, **extra}
        )
        answer = with_token(
            self.tokens,
            "inference",
            lambda key: self._call(self._inference.Predictions, request, key),
        )
        if error := from_body(answer.prediction, protocol=self.protocol):
            raise error
        return decode_answer(answer.prediction)

    def health(self) -> dict:
        answer = with_token(
            self.tokens,
            "inference",
            lambda key: self._call(self._inference.Ping, empty_pb2.Empty(), key),
        )
        return decode_answer(answer.health.encode())

    def list_models(self) -> list[str]:
        request = self._mpb.ListModelsRequest(limit=1000)
        answer = with_token(
            self.tokens,
            "management",
            lambda key: self._call(self._management.ListModels, request, key),
        )
        return sorted(m["modelName"] for m in json.loads(answer.msg).get("models", []))

    def close(self) -> None:
        self._channel.close()
        self._mchannel.close()

    def __enter__(self) -> GrpcClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, method, request, key: str | None):
        metadata = [("authorization", auth)] if (auth := bearer(key)) else []
        try:
            return method(request, metadata=metadata, timeout=self.settings.timeout)
        except grpc.RpcError as e:
            raise _error_from_rpc(e) from None


def _error_from_rpc(e: grpc.RpcError) -> ClientError:
    code, details = e.code(), e.details() or ""
    # TorchServe appends the Java exception's class on its own line: keep it as the error's kind,
    # named as REST names it ("ModelNotFoundException", not "BadRequestException.()").
    reason, _, java_class = details.partition("\n")
    kind = java_class.strip().removesuffix(".()").rsplit(".", 1)[-1] or None
    if kind == "InternalServerException" and _FULL_QUEUE in reason:
        kind = "ServiceUnavailableException"
    trailing = dict(getattr(e, "trailing_metadata", lambda: None)() or ())
    kind = trailing.get(KIND_METADATA) or kind
    rid = trailing.get(REQUEST_ID_HEADER.lower())
    error = _classify(code, reason, kind)
    error.request_id = error.request_id or (rid if isinstance(rid, str) else None)
    return error


def _classify(code: grpc.StatusCode, reason: str, kind: str | None) -> ClientError:
    if code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
        return AuthError(reason, kind=AUTH_EXCEPTION, protocol="grpc")
    if kind in _HTTP_STATUS_BY_EXCEPTION:
        return error_for(_HTTP_STATUS_BY_EXCEPTION[kind], reason, kind=kind, protocol="grpc")
    if code == grpc.StatusCode.UNAVAILABLE and kind is None:
        # Nothing answered at all (grpc's own UNAVAILABLE), not TorchServe's 503.
        return ConnectionFailed(reason, protocol="grpc")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return TimedOut(reason or "deadline exceeded", status=504, protocol="grpc")
    status = _HTTP_STATUS.get(code, 500)
    # A handler's reason may arrive as its JSON body in the details: unwrap it.
    if (marked := from_body(reason.encode(), protocol="grpc")) is not None:
        return error_for(
            status if status != 500 else marked.status,
            marked.reason,
            kind=marked.kind,
            protocol="grpc",
            request_id=marked.request_id,
        )
    return error_for(status, reason, kind=kind, protocol="grpc")
