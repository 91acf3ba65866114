"""The small error taxonomy: each kind of bad input maps to one HTTP status.

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
from http import HTTPStatus
from typing import Any

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
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


class RequestError(Exception):
    """A request the client must fix. `reason` is safe to return; it never echoes the body, and it is
    bounded (`MAX_REASON_CHARS`) whatever a caller put into it."""

    status = 400
    kind = "bad_request"
    retry_after_s: int | None = None
    """Set on refusals the client should retry (503): sent as the Retry-After header."""

    def __init__(self, reason: str):
        if len(reason) > MAX_REASON_CHARS:
            reason = reason[: MAX_REASON_CHARS - 15] + "... (truncated)"
        super().__init__(reason)
        self.reason = reason

    def to_body(self) -> dict:
        return {"error": self.reason, "kind": self.kind}


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
    """Input over a configured limit (bytes of text, samples of signal). TorchServe itself answers
    413 for bodies over `max_request_size`; this is the model's own, smaller limit."""

    kind = "too_large"


class UnsupportedMediaType(RequestError):
    """A content type the handler does not decode."""

    status = 415
    kind = "unsupported_media_type"


class BadState(RequestError):
    """A stream state that is undecodable, the wrong size, altered or non-finite."""

    kind = "bad_state"


class StaleState(RequestError):
    """A stream state this replica cannot continue (another model version or signing key): the
    client restarts the stream."""

    status = 409
    kind = "stale_state"


class NotServed(RequestError):
    """A TorchServe route or mode this deployment does not serve (e.g. /explanations): refused for
    this request alone, never switched on for its batch."""

    status = 501
    kind = "not_implemented"


class Overloaded(RequestError):
    """This batch's work budget is spent (handlers/budget.py): retry (into a later batch) after
    `retry_after_s`."""

    status = 503
    kind = "overloaded"
    retry_after_s: int | None = 1


class InternalError(RequestError):
    """The server failed on this request (a bug, not the client's input): 500 with the request id
    the traceback is logged under. Only this request gets it; its batch neighbours are answered."""

    status = 500
    kind = "internal"

    def __init__(self, request_id: str | None):
        super().__init__(
            f"the server failed on this request (request id {request_id}); it has been logged"
        )
        self.request_id = request_id

    def to_body(self) -> dict:
        return super().to_body() | {"request_id": self.request_id}


class ArchiveError(Exception):
    """The archive itself is wrong (missing file, bad setting): raised at load, never per request."""


def error_kinds() -> dict[str, type[RequestError]]:
    """Every RequestError kind → its class: the one taxonomy, which the clients look kinds up in
    (a gRPC answer marked bad per request comes back OK with only the body's kind to go on). Every
    kind is defined in this module, so importing it is enough to know them all."""
    found: dict[str, type[RequestError]] = {}
    todo: list[type[RequestError]] = [RequestError]
    while todo:
        cls = todo.pop()
        found.setdefault(cls.kind, cls)
        todo += cls.__subclasses__()
    return found


def status_by_kind() -> dict[str, int]:
    """Every RequestError kind → its status."""
    return {kind: cls.status for kind, cls in error_kinds().items()}


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


def mark_refused(context: Any, idx: int, err: RequestError) -> str:
    """Mark request `idx` of the batch with `err`'s status and return its JSON body."""
    context.set_response_content_type(idx, "application/json")
    context.set_response_status(err.status, reason_phrase(err.status), idx=idx)
    if err.retry_after_s is not None:
        context.set_response_header(idx, "Retry-After", str(err.retry_after_s))
    return json.dumps(err.to_body())
