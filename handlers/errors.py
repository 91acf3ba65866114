"""The error contract, once, as data: the catalogue of error kinds (`KINDS`) and the per-request
errors the lifecycle raises.

Every error answer, whoever writes it, is the JSON body {"error": reason, "kind": kind,
"request_id": id}: the handlers' refusals (the lifecycle, handlers/service.py), the Open Inference
Protocol server (oip/refusals.py: REST bodies and gRPC details, its gRPC status `ErrorKind.grpc_for`),
the MLflow PyFunc (training/pyfunc_model.py), and the pod's door (docker/haproxy.cfg, whose bodies are generated from
this catalogue by deploy/door.py). A kind says once which HTTP status it is answered with, whether
and when to retry, its gRPC status, and which exception the clients raise for it
(clients/errors.py).

Handlers catch `RequestError` per request and mark only that request with `mark_refused`, so its
batch neighbours are answered.

Client text never reaches TorchServe's reason phrase or a response header: TorchServe 0.12's worker
protocol frames the reason phrase by its length in characters but writes it as UTF-8 bytes, so one
non-ASCII character desynchronises the frame and the frontend kills the worker with its whole batch.
The reason phrase is the status's standard (ASCII) phrase; the details travel in the JSON body,
which `json.dumps` writes as ASCII.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

GRPC_BY_STATUS: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "UNIMPLEMENTED",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    411: "INVALID_ARGUMENT",
    413: "RESOURCE_EXHAUSTED",
    415: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
    507: "RESOURCE_EXHAUSTED",
}
"""The gRPC status of an HTTP status (TorchServe's GRPCUtils mapping, plus the door's own)."""

GRPC_CODES: dict[str, int] = {
    "OK": 0,
    "INVALID_ARGUMENT": 3,
    "DEADLINE_EXCEEDED": 4,
    "NOT_FOUND": 5,
    "PERMISSION_DENIED": 7,
    "RESOURCE_EXHAUSTED": 8,
    "ABORTED": 10,
    "UNIMPLEMENTED": 12,
    "INTERNAL": 13,
    "UNAVAILABLE": 14,
    "UNAUTHENTICATED": 16,
}
"""gRPC status names → their numbers (grpc-status in the door's trailers-only answers)."""


@dataclass(frozen=True)
class ErrorKind:
    """One kind of error answer: how it is served and what a client makes of it."""

    kind: str
    status: int
    """The HTTP status it is answered with."""
    client: str
    """The exception clients/errors.py raises for it (a class name there)."""
    by: str
    """Who answers it: "handler" (the lifecycle, per request), "door" (the pod's HAProxy) or
    "torchserve" (TorchServe's own refusal, rewritten at the door into this shape)."""
    meaning: str
    also: tuple[int, ...] = ()
    """Other statuses the same kind is answered with, by another layer (a 413 at the door and the
    model's own 400 are both `too_large`): a client keeps such a status as it came."""
    retry_after_s: int | None = None
    """Retry after this many seconds (the Retry-After header); None: not the same request as is."""
    retryable: bool = False
    """The same request may succeed later, unchanged."""

    @property
    def statuses(self) -> tuple[int, ...]:
        return (self.status, *self.also)

    @property
    def grpc(self) -> str:
        """Its gRPC status name (the gRPC status of `status`)."""
        return GRPC_BY_STATUS[self.status]

    def grpc_for(self, status: int) -> str:
        """The gRPC status of this kind answered with `status` (one of `statuses`)."""
        return GRPC_BY_STATUS[status if status in self.statuses else self.status]


def _catalogue(*kinds: ErrorKind) -> dict[str, ErrorKind]:
    return {k.kind: k for k in kinds}


KINDS: dict[str, ErrorKind] = _catalogue(
    ErrorKind("bad_request", 400, "BadRequest", "handler", "a request the client must fix"),
    ErrorKind("bad_encoding", 400, "BadRequest", "handler", "bytes not UTF-8, or invalid JSON"),
    ErrorKind("bad_field", 400, "BadRequest", "handler", "a missing field, wrong type or value"),
    ErrorKind("empty_input", 400, "BadRequest", "handler", "empty text or an empty signal"),
    ErrorKind(
        "too_large",
        400,
        "PayloadTooLarge",
        "handler",
        "input over the model's own limit (400), or a body over max_request_size (413, door)",
        also=(413,),
    ),
    ErrorKind(
        "unsupported_media_type",
        415,
        "UnsupportedMediaType",
        "handler",
        "a content type not decoded",
    ),
    ErrorKind("bad_state", 400, "BadRequest", "handler", "a stream state undecodable or altered"),
    ErrorKind(
        "stale_state", 409, "Conflict", "handler", "a stream state from another version or key"
    ),
    ErrorKind("not_implemented", 501, "ServerError", "handler", "a route or mode not served"),
    ErrorKind(
        "overloaded",
        503,
        "Overloaded",
        "handler",
        "the work budget, the door's in-flight cap or TorchServe's queue is full",
        retry_after_s=1,
        retryable=True,
    ),
    ErrorKind(
        "internal",
        500,
        "ServerError",
        "handler",
        "the server failed on this request (507: TorchServe's own failure, rewritten at the door)",
        also=(507,),
    ),
    ErrorKind("unauthorized", 401, "AuthError", "door", "a missing or invalid bearer token"),
    ErrorKind("length_required", 411, "BadRequest", "door", "a chunked upload (no Content-Length)"),
    ErrorKind("not_found", 404, "ModelNotFound", "door", "a route, model or version not served"),
    ErrorKind("method_not_allowed", 405, "BadRequest", "door", "a served route, another method"),
    ErrorKind(
        "timeout",
        408,
        "TimedOut",
        "door",
        "the request did not arrive in time (408), or TorchServe did not answer in time (504)",
        also=(504,),
        retryable=True,
    ),
)
"""Every error kind any layer answers with, by kind. Served bodies name only these kinds."""

REQUEST_ID_HEADER = "X-Request-ID"
"""The request id's header, both ways: a client may send one, every answer carries it."""
REQUEST_ID_PATTERN = "^[!-~]{1,128}$"
"""A client's request id is kept when it is 1-128 printable ASCII characters without spaces (the
door, docker/haproxy.cfg, and the worker apply the same rule); otherwise the server makes one."""
_REQUEST_ID = re.compile(REQUEST_ID_PATTERN)


def valid_request_id(value: object) -> str | None:
    """`value` when it is an acceptable client request id (`REQUEST_ID_PATTERN`), else None."""
    if isinstance(value, bytes | bytearray):
        value = bytes(value).decode("ascii", "replace")
    return value if isinstance(value, str) and _REQUEST_ID.fullmatch(value) else None


MAX_REASON_CHARS = 512
"""A reason longer than this is cut: it goes to the response body and to two logs per request."""


def echo(value: object, limit: int = 40) -> str:
    """A client's value quoted in a reason, bounded: a 900,000-digit number is not sent back whole
    (nor written to the logs), its first characters are enough to recognise it."""
    try:
        text = repr(value)
    except ValueError:  # an int over Python's 4300-digit str() limit
        figures = int(value.bit_length() * 0.30103) if isinstance(value, int) else "many"
        return f"<a number of about {figures} figures>"
    except RecursionError:  # a list or object nested deeper than repr() goes
        return f"<a {type(value).__name__} nested too deep to show>"
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


class RequestError(Exception):
    """A request the client must fix. `reason` is safe to return; it never echoes the body, and it is
    bounded (`MAX_REASON_CHARS`) whatever a caller put into it. A subclass names its `kind`; its
    status and retry come from the catalogue (`KINDS`)."""

    kind = "bad_request"
    status = 400
    """From the catalogue: `KINDS[kind].status` (a subclass may name another status its kind is
    answered with, e.g. an adapter's own 413 `too_large`)."""
    retry_after_s: int | None = None
    """From the catalogue: sent as the Retry-After header on refusals the client should retry."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        entry = KINDS[cls.kind]  # a kind not in the catalogue fails at import
        own = cls.__dict__
        if "status" in own and cls.status not in entry.statuses:
            raise TypeError(f"{cls.kind} is answered with {entry.statuses}, not {cls.status}")
        if "status" not in own:
            cls.status = entry.status
        if "retry_after_s" not in own:
            cls.retry_after_s = entry.retry_after_s

    def __init__(self, reason: str):
        if len(reason) > MAX_REASON_CHARS:
            reason = reason[: MAX_REASON_CHARS - 15] + "... (truncated)"
        super().__init__(reason)
        self.reason = reason

    def to_body(self, request_id: str | None = None) -> dict:
        """The JSON error body; `request_id` when the request has one."""
        return error_body(self.reason, self.kind, request_id)


class BadEncoding(RequestError):
    """Bytes that are not UTF-8, or a body that is not valid JSON."""

    kind = "bad_encoding"


class BadField(RequestError):
    """A missing field, a wrong JSON type, or a value out of the served range."""

    kind = "bad_field"


class EmptyInput(RequestError):
    """Empty or whitespace-only text, or an empty signal."""

    kind = "empty_input"


class TooLarge(RequestError):
    """Input over a configured limit (bytes of text, samples of signal). The door answers 413 for
    bodies over `max_request_size`; this is the model's own, smaller limit (400)."""

    kind = "too_large"


class BodyTooLarge(TooLarge):
    """A request body over the adapter's own byte limit (the OIP server's --max-request-bytes,
    as the door's max_request_size): the kind's 413, refused before the body is read whole."""

    status = 413


class UnsupportedMediaType(RequestError):
    """A content type the handler does not decode."""

    kind = "unsupported_media_type"


class BadState(RequestError):
    """A stream state that is undecodable, the wrong size, altered or non-finite."""

    kind = "bad_state"


class StaleState(RequestError):
    """A stream state this replica cannot continue (another model version or signing key): the
    client restarts the stream."""

    kind = "stale_state"


class NotServed(RequestError):
    """A TorchServe route or mode this deployment does not serve (e.g. /explanations): refused for
    this request alone, never switched on for its batch."""

    kind = "not_implemented"


class Overloaded(RequestError):
    """This batch's work budget is spent (handlers/budget.py): retry (into a later batch) after
    `retry_after_s`."""

    kind = "overloaded"


class Unauthorized(RequestError):
    """A missing or wrong bearer token, refused by an adapter that checks tokens itself (the OIP
    server; on TorchServe's path the door or TorchServe checks them)."""

    kind = "unauthorized"


class InternalError(RequestError):
    """The server failed on this request (a bug, not the client's input): 500 with the request id
    the traceback is logged under. Only this request gets it; its batch neighbours are answered."""

    kind = "internal"

    def __init__(self, request_id: str | None):
        super().__init__(
            f"the server failed on this request (request id {request_id}); it has been logged"
        )
        self.request_id = request_id

    def to_body(self, request_id: str | None = None) -> dict:
        return super().to_body(request_id or self.request_id)


RequestError.status = KINDS[RequestError.kind].status


def error_body(reason: str, kind: str, request_id: str | None = None) -> dict:
    """The one JSON error body: {"error", "kind"} and, when known, "request_id"."""
    body: dict = {"error": reason, "kind": kind}
    if request_id is not None:
        body["request_id"] = request_id
    return body


class ArchiveError(Exception):
    """The archive itself is wrong (missing file, bad setting): raised at load, never per request."""


def error_kinds() -> dict[str, type[RequestError]]:
    """Every kind a handler raises → its RequestError class (the catalogue's "handler" kinds, whose
    classes are all defined in this module: importing it is enough to know them)."""
    found: dict[str, type[RequestError]] = {}
    todo: list[type[RequestError]] = [RequestError]
    while todo:
        cls = todo.pop()
        if cls.__module__ == __name__ and KINDS[cls.kind].by == "handler":
            found.setdefault(cls.kind, cls)
        todo += cls.__subclasses__()
    return found


def reason_phrase(status: int) -> str:
    """The standard HTTP reason phrase of `status`: ASCII, and never client text."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


_HEADER_UNSAFE = re.compile(r"[^\x20-\x7e]")


def header_value(value: str, limit: int = 256) -> str:
    """A response header value that is printable ASCII and bounded: anything else would either
    break the worker frame (non-ASCII) or split the HTTP response (CR/LF)."""
    return _HEADER_UNSAFE.sub("?", value)[:limit]


def refusal(err: RequestError, request_id: str | None = None) -> tuple[int, dict[str, str], str]:
    """A refused request's status, headers (Retry-After) and JSON body, from the catalogue."""
    headers = {} if err.retry_after_s is None else {"Retry-After": str(err.retry_after_s)}
    return err.status, headers, json.dumps(err.to_body(request_id))


def mark_refused(context: Any, idx: int, err: RequestError, request_id: str | None = None) -> str:
    """Mark request `idx` of the batch with `err`'s status and return its JSON body."""
    status, headers, body = refusal(err, request_id)
    context.set_response_content_type(idx, "application/json")
    context.set_response_status(status, reason_phrase(status), idx=idx)
    for name, value in headers.items():
        context.set_response_header(idx, name, value)
    return body
