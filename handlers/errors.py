"""The small error taxonomy: each kind of bad input maps to one HTTP status.

Handlers catch `RequestError` per request and mark only that request with
`context.set_response_status(err.status, err.reason, idx=i)`, so its batch neighbours are answered.
"""

from __future__ import annotations


class RequestError(Exception):
    """A request the client must fix. `reason` is safe to return; it never echoes the body."""

    status = 400
    kind = "bad_request"

    def __init__(self, reason: str):
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


class ArchiveError(Exception):
    """The archive itself is wrong (missing file, bad setting): raised at load, never per request."""
