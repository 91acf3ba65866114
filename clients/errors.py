"""Typed client errors: the same exception, carrying the server's reason, over REST and gRPC.

TorchServe answers the same failure differently per protocol (a handler's 400 is an HTTP 400 over
REST, INVALID_ARGUMENT over gRPC, or even gRPC OK with the error JSON as the body when the handler
marked only one request of a batch). Everything is folded here into one small hierarchy keyed by the
HTTP status, so callers write `except BadRequest as e: e.reason` once.

The kinds are the server's: a handler's answer names its `kind`, and the client looks it up in the
server's taxonomy (handlers/errors.py, imported: it has no heavy dependency) for its status and its
class (`ClientError.error_class`), so a kind's status is written once, there. The classes here are
HTTP status families (`Overloaded` covers the handler's `overloaded` kind and TorchServe's own full
queue), not a second list of kinds.
"""

from __future__ import annotations

import json
from typing import Any

from handlers.errors import RequestError, error_kinds


class ClientError(Exception):
    """A call the server refused or could not answer. `status` is the HTTP equivalent."""

    status: int = 500

    def __init__(
        self, reason: str, *, status: int | None = None, kind: str | None = None, protocol: str = ""
    ):
        super().__init__(reason)
        self.reason = reason
        self.kind = kind
        self.protocol = protocol
        if status is not None:
            self.status = status

    @property
    def error_class(self) -> type[RequestError] | None:
        """The server's error class of this answer's kind (None: not a handler's kind, e.g.
        TorchServe's own refusals)."""
        return error_kinds().get(self.kind or "")

    def __str__(self) -> str:
        where = f" over {self.protocol}" if self.protocol else ""
        return f"{self.status} {type(self).__name__}{where}: {self.reason}"


class BadRequest(ClientError):
    """The request itself is wrong (missing field, bad value, undecodable body): fix and resend."""

    status = 400


class AuthError(ClientError):
    """The token was missing, wrong or expired and no fresh one could be found."""

    status = 401


class ModelNotFound(ClientError):
    status = 404


class PayloadTooLarge(ClientError):
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


_BY_STATUS: dict[int, type[ClientError]] = {
    400: BadRequest,
    401: AuthError,
    403: AuthError,
    404: ModelNotFound,
    409: Conflict,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    429: Overloaded,
    503: Overloaded,
}
AUTH_EXCEPTION = "InvalidKeyException"


def error_for(
    status: int, reason: str, *, kind: str | None = None, protocol: str = ""
) -> ClientError:
    """The client error of an answer; a handler's `kind` decides its status (the server's taxonomy),
    whatever status the protocol carried it with."""
    server = error_kinds().get(kind or "")
    if server is not None:
        status = server.status
    cls = _BY_STATUS.get(
        status, ServerError if status >= 500 else BadRequest if status >= 400 else ClientError
    )
    return cls(reason, status=status, kind=kind, protocol=protocol)


def parse_error_body(body: bytes | str) -> tuple[str, str | None] | None:
    """(reason, kind) from a handler's `{"error": reason}` or TorchServe's `{"code","type","message"}`."""
    try:
        data: Any = json.loads(body)
    except (ValueError, TypeError):
        return None
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("error"), str):
        return data["error"], data.get("kind")
    if isinstance(data.get("message"), str) and "code" in data:
        return data["message"], data.get("type")
    return None


def from_http(
    status: int, body: bytes, status_text: str = "", protocol: str = "rest"
) -> ClientError:
    parsed = parse_error_body(body)
    reason, kind = (
        parsed if parsed else ((body.decode(errors="replace").strip() or status_text), None)
    )
    if kind == AUTH_EXCEPTION:
        return AuthError(reason, kind=kind, protocol=protocol)
    return error_for(status, reason, kind=kind, protocol=protocol)


def from_body(body: bytes, protocol: str = "grpc") -> ClientError | None:
    """A handler-marked bad request that came back with status OK (gRPC): the body says so."""
    parsed = parse_error_body(body)
    if parsed is None:
        return None
    reason, kind = parsed
    server = error_kinds().get(kind or "")
    return error_for(server.status if server else 400, reason, kind=kind, protocol=protocol)
