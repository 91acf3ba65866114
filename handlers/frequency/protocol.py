"""Streaming control carried in request headers (TorchServe's sequence header names), and the
response body of one request.

A stream opens with `ts_request_sequence_start: true` (with a client-chosen
`ts_request_sequence_id`, or one the handler makes up and returns), continues with the same
`ts_request_sequence_id`, and `ts_request_sequence_end: true` on a chunk closes it after that chunk.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from handlers.errors import BadField

SEQUENCE_ID = "ts_request_sequence_id"
SEQUENCE_START = "ts_request_sequence_start"
SEQUENCE_END = "ts_request_sequence_end"
_TRUE = {"1", "true", "yes"}
_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
"""A sequence id is echoed in a response header, so it is a plain ASCII token."""


class UnknownSequence(BadField):
    """A chunk for a stream that was never opened, was closed, or expired: its state is gone."""

    status = 404
    kind = "unknown_sequence"


@dataclass(frozen=True)
class StreamControl:
    sequence_id: str
    start: bool
    end: bool


def _get(headers: dict, name: str) -> str | None:
    for k, v in headers.items():
        if isinstance(k, str) and k.lower() == name and isinstance(v, str | bytes):
            return v.decode() if isinstance(v, bytes) else v
    return None


def stream_control(headers: dict) -> StreamControl | None:
    """None for a one-shot request; otherwise which stream, and whether it opens or closes."""
    sid = (_get(headers, SEQUENCE_ID) or "").strip()
    start = (_get(headers, SEQUENCE_START) or "").strip().lower() in _TRUE
    end = (_get(headers, SEQUENCE_END) or "").strip().lower() in _TRUE
    if not sid and not start:
        if end:
            raise BadField(f"{SEQUENCE_END} needs a {SEQUENCE_ID}")
        return None
    if sid and not _ID.fullmatch(sid):
        raise BadField(
            f"{SEQUENCE_ID} must be 1 to 128 ASCII letters, digits, '.', '_', ':' or '-'"
        )
    return StreamControl(sid or f"freq-{uuid.uuid4().hex}", start, end)
