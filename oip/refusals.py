"""How a refused request is answered, over every path into the server, from the catalogue
(handlers/errors.py: its status, gRPC code, Retry-After and JSON body `{"error", "kind",
"request_id"}`): nothing here maps a kind to a status of its own.

- `Refused`: the exception a model's `predict` raises: REST answers it with the kind's status and
  body (`rest_refusals`), gRPC with the kind's code and the same JSON as details;
- `send_refusal`: an ASGI answer written before KServe reads the request (the middlewares);
- `rest_refusals`: FastAPI's own refusals (422 for a body KServe's models refuse, 400 for one that
  is not the JSON it declares) answered in the protocol's shape instead;
- `request_id_of`: a request's id, by the rule TorchServe's path applies.
"""

from __future__ import annotations

import functools
import json
import uuid
from typing import Any

from handlers.errors import (
    KINDS,
    REQUEST_ID_HEADER,
    BadEncoding,
    BadField,
    RequestError,
    valid_request_id,
)


def grpc_code(err: RequestError) -> Any:
    """The gRPC status of a refusal: the catalogue's (handlers/errors.KINDS) for its kind and the
    HTTP status it is answered with, never a mapping of this server's own."""
    from grpc import StatusCode

    return StatusCode[KINDS[err.kind].grpc_for(err.status)]


@functools.cache
def refused_class() -> type:
    """`Refused`, a `GrpcException` (grpc_interceptor, the OIP venv's): built on first use."""
    from grpc_interceptor.exceptions import GrpcException

    class Refused(GrpcException):
        """One request's refusal: REST status + JSON body, or gRPC status + the JSON as details."""

        def __init__(self, err: RequestError, request_id: str | None = None):
            super().__init__(json.dumps(err.to_body(request_id)), grpc_code(err))
            self.error = err
            self.request_id = request_id

    return Refused


def request_id_of(given: Any, headers: dict[str, str] | None) -> str:
    """A request's id, by TorchServe's path's rule (handlers/errors.REQUEST_ID_PATTERN): the
    request's own `id` when acceptable, else the client's X-Request-ID (REST header or gRPC
    metadata), else a new one. It goes to the model's log lines and every error body."""
    header = next(
        (v for k, v in (headers or {}).items() if k.lower() == REQUEST_ID_HEADER.lower()), None
    )
    return valid_request_id(given) or valid_request_id(header) or str(uuid.uuid4())


def scope_request_id(scope: dict) -> str:
    """The request id of an ASGI request answered before KServe reads its body."""
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
    return request_id_of(None, headers)


def rest_headers(err: RequestError, request_id: str | None) -> dict[str, str]:
    """A refusal's REST headers: its kind's Retry-After, WWW-Authenticate on a 401, the request
    id."""
    headers = {"Retry-After": str(err.retry_after_s)} if err.retry_after_s is not None else {}
    if err.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if request_id is not None:
        headers[REQUEST_ID_HEADER] = request_id
    return headers


async def send_refusal(send: Any, err: RequestError, request_id: str) -> None:
    """`err` as an ASGI answer (its status, `rest_headers` and JSON body), written before KServe's
    app sees the request."""
    body = json.dumps(err.to_body(request_id)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in rest_headers(err, request_id).items()]
    await send({"type": "http.response.start", "status": err.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def rest_refusals(app: Any) -> None:
    """`app`'s exception handlers: a `Refused` with its kind's status, headers and body; FastAPI's
    own 422 and 400 as the protocol's 400 with the catalogue's body."""
    from fastapi.exception_handlers import http_exception_handler
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException

    def answer(err: RequestError, request_id: str | None) -> JSONResponse:
        headers = rest_headers(err, request_id)
        return JSONResponse(err.to_body(request_id), status_code=err.status, headers=headers)

    async def refused(_: Any, exc: Any) -> JSONResponse:
        err: RequestError | None = getattr(exc, "error", None)
        if err is None:  # a gRPC-only exception from elsewhere: KServe's generic answer
            return JSONResponse({"error": str(exc)}, status_code=500)
        return answer(err, getattr(exc, "request_id", None))

    # Starlette finds a handler by the exception's classes: every Refused is one GrpcException.
    app.add_exception_handler(refused_class().__mro__[1], refused)

    async def invalid(request: Any, exc: Any) -> JSONResponse:
        """KServe's pydantic models refuse a request of the wrong shape (a null parameter, a
        string where a number goes) with FastAPI's 422 {"detail": [...]}: the protocol's 400 and
        error shape instead, naming the first place."""
        first = (exc.errors() or [{}])[0]
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        err = BadField(f"{where}: {str(first.get('msg', 'invalid')).lower()}"[:300])
        return answer(err, request_id_of(None, dict(request.headers)))

    app.add_exception_handler(RequestValidationError, invalid)

    async def unparsed(request: Any, exc: Any) -> Any:
        """FastAPI answers a body it cannot parse (JSON declared, not sent) with 400
        {"detail": ...}: the protocol's error shape instead; other statuses as Starlette does."""
        if exc.status_code != 400:
            return await http_exception_handler(request, exc)
        err = BadEncoding(f"the body is not the JSON it says it is: {str(exc.detail).lower()}")
        return answer(err, request_id_of(None, dict(request.headers)))

    app.add_exception_handler(HTTPException, unparsed)
