"""Typed client errors: the same exception, carrying the server's reason, over REST and gRPC.

TorchServe answers the same failure differently per protocol (a handler's 400 is an HTTP 400 over
REST, INVALID_ARGUMENT over gRPC, or even gRPC OK with the error JSON as the body when the handler
marked only one request of a batch). Everything is folded here into one small hierarchy keyed by the
HTTP status, so callers write `except BadRequest as e: e.reason` once.

The kinds are the server's: every error answer (a handler's, the door's) names its `kind`, and the
client looks it up in the catalogue (handlers/errors.KINDS, imported: it has no heavy dependency)
for the exception to raise and the status: the status the answer came with when the kind is
answered with it (the door's `413 too_large` stays 413, the model's own `400 too_large` 400), else
the kind's own (a gRPC answer marked bad per request comes back OK, with only the body's kind to go
on). The classes here are HTTP status families (`Overloaded` covers the handler's `overloaded`
kind and TorchServe's own full queue), not a second list of kinds. An answer's `request_id` (the
door's X-Request-ID, or the worker's) is kept on the exception, to quote it.
"""

from __future__ import annotations

import json
from typing import Any

from handlers.errors import KINDS, ErrorKind, RequestError, error_kinds


class ClientError(Exception):
    """A call the server refused or could not answer. `status` is the HTTP equivalent."""

    status: int = 500

    def __init__(
        self,
        reason: str,
        *,
        status: int | None = None,
        kind: str | None = None,
        protocol: str = "",
        request_id: str | None = None,
    ):
        super().__init__(reason)
        self.reason = reason
        self.kind = kind
        self.protocol = protocol
        self.request_id = request_id
        if status is not None:
            self.status = status

    @property
    def catalogued(self) -> ErrorKind | None:
        """The catalogue's entry of this answer's kind (None: not one of the served kinds)."""
        return KINDS.get(self.kind or "")

    @property
    def retryable(self) -> bool:
        """The same request may succeed later (overloaded, a timeout, no answer at all)."""
        entry = self.catalogued
        return entry.retryable if entry else isinstance(self, Overloaded | ConnectionFailed)

    @property
    def error_class(self) -> type[RequestError] | None:
        """The server's error class of this answer's kind (None: not a handler's kind, e.g.
        TorchServe's own refusals)."""
        return error_kinds().get(self.kind or "")

    def __str__(self) -> str:
        where = f" over {self.protocol}" if self.protocol else ""
        rid = f" (request id {self.request_id})" if self.request_id else ""
        return f"{self.status} {type(self).__name__}{where}: {self.reason}{rid}"


class BadRequest(ClientError):
    """The request itself is wrong (missing field, bad value, undecodable body): fix and resend."""

    status = 400


class AuthError(ClientError):
    """The token was missing, wrong or expired and no fresh one could be found."""

    status = 401


class ModelNotFound(ClientError):
    status = 404


class PayloadTooLarge(BadRequest):
    """A body over the server's max_request_size (413), or an input over the model's own limit
    (400, kind too_large): send less."""

    status = 413


class Conflict(ClientError):
    """The request cannot continue what it names: a stream state made by another model version
    or signing key (a rolling update mid-stream). Restart the stream."""

    status = 409


class UnsupportedMediaType(ClientError):
    status = 415


class Overloaded(ClientError):
    """Queue full or no worker: retry later (HTTP 503, gRPC UNAVAILABLE / RESOURCE_EXHAUSTED)."""

    status = 503


class ServerError(ClientError):
    """The server (or a handler crashing on a whole batch) failed: not the caller's fault."""

    status = 500


class ConnectionFailed(ClientError):
    """No answer at all: wrong address, server down, or timed out."""

    status = 503


class TimedOut(ConnectionFailed):
    """The request did not arrive in time (408 at the door), or no answer came in time (504)."""

    status = 504


_BY_STATUS: dict[int, type[ClientError]] = {
    400: BadRequest,
    401: AuthError,
    403: AuthError,
    404: ModelNotFound,
    409: Conflict,
    413: PayloadTooLarge,
    408: TimedOut,
    415: UnsupportedMediaType,
    429: Overloaded,
    503: Overloaded,
    504: TimedOut,
}
AUTH_EXCEPTION = "InvalidKeyException"


def error_for(
    status: int,
    reason: str,
    *,
    kind: str | None = None,
    protocol: str = "",
    request_id: str | None = None,
) -> ClientError:
    """The client error of an answer, by its status and kind: a catalogued kind names the exception,
    and keeps `status` where the kind is answered with it (else the kind's own status); any other
    answer is classed by its status."""
    entry = KINDS.get(kind or "")
    cls: type[ClientError]
    if entry is not None:
        if status not in entry.statuses:
            status = entry.status
        cls = globals()[entry.client]
    else:
        cls = _BY_STATUS.get(
            status, ServerError if status >= 500 else BadRequest if status >= 400 else ClientError
        )
    return cls(reason, status=status, kind=kind, protocol=protocol, request_id=request_id)


def parse_error_body(body: bytes | str) -> tuple[str, str | None] | None:
    """(reason, kind) from a handler's `{"error": reason}` or TorchServe's `{"code","type","message"}`."""
    parsed = _parse(body)
    return None if parsed is None else parsed[:2]


def _parse(body: bytes | str) -> tuple[str, str | None, str | None] | None:
    """(reason, kind, request_id) of an error body."""
    try:
        data: Any = json.loads(body)
    except (ValueError, TypeError):
        return None
    if not isinstance(data, dict):
        return None
    rid = data.get("request_id")
    rid = rid if isinstance(rid, str) else None
    if isinstance(data.get("error"), str):
        return data["error"], data.get("kind"), rid
    if isinstance(data.get("message"), str) and "code" in data:
        return data["message"], data.get("type"), rid
    return None


def from_http(
    status: int,
    body: bytes,
    status_text: str = "",
    protocol: str = "rest",
    request_id: str | None = None,
) -> ClientError:
    """The error of an HTTP answer; `request_id`: its X-Request-ID header (the body's wins)."""
    parsed = _parse(body)
    reason, kind, rid = (
        parsed if parsed else ((body.decode(errors="replace").strip() or status_text), None, None)
    )
    rid = rid or request_id
    if kind == AUTH_EXCEPTION:
        return AuthError(reason, kind=kind, protocol=protocol, request_id=rid)
    return error_for(status, reason, kind=kind, protocol=protocol, request_id=rid)


def from_body(body: bytes, protocol: str = "grpc") -> ClientError | None:
    """A handler-marked bad request that came back with status OK (gRPC): the body says so."""
    parsed = _parse(body)
    if parsed is None:
        return None
    reason, kind, rid = parsed
    entry = KINDS.get(kind or "")
    return error_for(
        entry.status if entry else 400, reason, kind=kind, protocol=protocol, request_id=rid
    )
