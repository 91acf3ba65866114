"""What the server answers before KServe reads a request: ASGI middlewares on REST and one gRPC
interceptor, each refusal in the catalogue's shape (oip/refusals.py).

REST, outermost first (oip/app.py adds them): `OnlyTheProtocol` (the protocol's routes, the
model's own version), `BodyLimit` (413 before a body is read whole), `InferEdge` (a plain JSON
request without a Content-Type, the token, then the body against the protocol, oip/edge.py).
gRPC: `GrpcGuard` (no model repository RPCs; an undecodable message or a malformed
ModelInferRequest is INVALID_ARGUMENT).
"""

from __future__ import annotations

import json
import re
from typing import Any

import grpc

from handlers.errors import BadEncoding, BodyTooLarge, RequestError, echo
from oip.auth import Token
from oip.edge import check_rest, grpc_infer_problem
from oip.refusals import grpc_code, request_id_of, scope_request_id, send_refusal

ROUTES = re.compile(
    r"(GET /v2(/health/(live|ready))?"
    r"|GET /v2/models/[^/]+(/versions/[^/]+)?(/ready)?"
    r"|POST /v2/models/[^/]+(/versions/[^/]+)?/infer)"
)
"""The protocol's health, metadata and inference routes: all REST serves. KServe's app also has
v1 routes, /metrics, /docs and the model repository (POST .../unload would take a model away)."""

VERSIONED = re.compile(r"/v2/models/([^/]+)/versions/([^/]+)(/ready|/infer)?/?")
INFER = re.compile(r"/v2/models/[^/]+/infer/?")
DENIED_RPCS = {"RepositoryModelLoad", "RepositoryModelUnload"}


class NotFound(RequestError):
    """A route, model or version not served: the catalogue's `not_found`."""

    kind = "not_found"


class OnlyTheProtocol:
    """ASGI middleware: anything but `ROUTES` is 404 before KServe sees it. A versioned route
    (`/v2/models/<m>/versions/<v>[/ready|/infer]`, which KServe 0.21 answers with a 500-class
    NotImplementedError) is the model's own route when <v> is the version it serves, else 404."""

    def __init__(self, app: Any, versions: dict[str, str]):
        self.app = app
        self.versions = versions

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            path = scope.get("path", "")
            reason = None
            if not ROUTES.fullmatch(f"{scope.get('method')} {path.rstrip('/') or '/'}"):
                reason = "not found"
            elif versioned := VERSIONED.fullmatch(path):
                name, version, rest = versioned.groups()
                served = self.versions.get(name)
                if served is None:
                    reason = f"model {echo(name)} is not served"
                elif version != served:
                    reason = f"model {name!r} has no version {echo(version)}: it serves " + (
                        f"version {served!r}" if served else "no named version"
                    )
                own = f"/v2/models/{name}{rest or ''}"  # the model's own route
                scope = {**scope, "path": own, "raw_path": own.encode()}
            if reason is not None:
                await send_refusal(send, NotFound(reason), scope_request_id(scope))
                return
        await self.app(scope, receive, send)


class BodyLimit:
    """ASGI middleware: a request body over `limit` bytes is refused with 413 before it is read
    whole (TorchServe's max_request_size; gRPC's own limit is the same number)."""

    def __init__(self, app: Any, limit: int):
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(scope, send)
            return
        seen = 0
        refused = False

        async def bounded() -> dict:
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message.get("type") == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:  # a body without Content-Length (chunked) that runs over
                    refused = True
                    await self._refuse(scope, send)
                    return {"type": "http.disconnect"}
            return message

        async def guarded(message: dict) -> None:
            if not refused:  # once refused, the app's own answer (to the disconnect) is dropped
                await send(message)

        await self.app(scope, bounded, guarded)

    async def _refuse(self, scope: dict, send: Any) -> None:
        err = BodyTooLarge(f"the request body is over {self.limit} bytes")
        await send_refusal(send, err, scope_request_id(scope))


class InferEdge:
    """ASGI middleware, inside the body limit. A POST with no Content-Type and no binary tensors
    (Inference-Header-Content-Length) is JSON: tritonclient's HTTP client sends plain JSON requests
    without a Content-Type, which KServe would otherwise read as binary and refuse. Then an infer
    POST's token, then its body checked against the protocol (oip/edge.py: field types, the binary
    extension's header and sizes, each tensor's size against its datatype and shape) before KServe
    reads it; a malformed request is the client's 400 (or 413) with the catalogue's JSON body. The
    body is then handed on as sent."""

    def __init__(self, app: Any, token: Token):
        self.app = app
        self.token = token

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        names = {k.lower() for k, _ in scope.get("headers", [])}
        if b"content-type" not in names and b"inference-header-content-length" not in names:
            scope = {
                **scope,
                "headers": [*scope.get("headers", []), (b"content-type", b"application/json")],
            }
        if not INFER.fullmatch(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        chunks = []
        while True:
            message = await receive()
            if message.get("type") != "http.request":
                return  # the client went away (or the body limit refused it)
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            self.token.check(headers)
            check_rest(body, headers)
        except RequestError as err:
            await send_refusal(send, err, request_id_of(None, headers))
            return
        delivered = False

        async def replay() -> dict:
            nonlocal delivered
            if delivered:
                return await receive()
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


class GrpcGuard(grpc.aio.ServerInterceptor):
    """The model repository RPCs (load, unload) are not served: a client could unload a model. A
    message that does not decode is the client's INVALID_ARGUMENT (gRPC itself answers UNKNOWN
    with the parser's exception), and so is a ModelInferRequest oip/edge.py refuses, with the
    refusals' JSON as its details."""

    async def intercept_service(self, continuation: Any, details: Any) -> Any:
        method = details.method.rsplit("/", 1)[-1]
        if method in DENIED_RPCS:

            async def deny(request: Any, context: Any) -> None:
                await context.abort(grpc.StatusCode.UNIMPLEMENTED, "not served here")

            return grpc.unary_unary_rpc_method_handler(deny)
        handler = await continuation(details)
        if handler is None or handler.unary_unary is None or not handler.request_deserializer:
            return handler
        return _decoded_or_invalid(handler, method)


def _decoded_or_invalid(handler: Any, method: str) -> Any:
    decode, behaviour = handler.request_deserializer, handler.unary_unary
    undecodable = object()

    def lenient(raw: bytes) -> Any:
        try:
            return decode(raw)
        except Exception:  # protobuf's DecodeError, or anything its parser raises
            return undecodable

    async def checked(request: Any, context: Any) -> Any:
        if request is undecodable:
            err = BadEncoding("the message does not decode as this RPC's request")
            await context.abort(grpc_code(err), json.dumps(err.to_body()))
        problem = grpc_infer_problem(request) if method == "ModelInfer" else None
        if problem is not None:
            request_id = request_id_of(request.id, dict(context.invocation_metadata() or ()))
            await context.abort(grpc_code(problem), json.dumps(problem.to_body(request_id)))
        return await behaviour(request, context)

    return grpc.unary_unary_rpc_method_handler(
        checked,
        request_deserializer=lenient,
        response_serializer=handler.response_serializer,
    )
