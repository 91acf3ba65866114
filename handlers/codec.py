"""Wire format → Python objects, for every handler.

TorchServe can hand a request's body over in several shapes: already-parsed JSON (dict, list, str,
number) when the Content-Type is exactly `application/json` and the JSON parsed, `str` for `text/*`
bodies that are valid UTF-8, and raw `bytes`/`bytearray` otherwise (bad JSON, non-UTF-8 text, gRPC,
`application/json; charset=utf-8`, ...). This project's config.properties turns that decoding off
(`decode_input_request=false`: every body arrives as the client's bytes and `parse_json` reads it
once, faster, with json's meaning), and a server started without that line still works. This
module turns all of them into one `Payload` or a `RequestError`, so handlers never branch on what
the frontend did. It is the one request layer of every model: the body, its media type, the
headers (`request_header`) and the content encoding.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from handlers.errors import BadEncoding, BadField, UnsupportedMediaType

if TYPE_CHECKING:
    from handlers.service import Request

SNIFFED_TYPES = ("", "application/octet-stream", "application/x-www-form-urlencoded")
"""Content types that say nothing useful (gRPC sends none, curl -d sends form-urlencoded):
the body itself decides between JSON and text."""


@dataclass(frozen=True)
class Payload:
    kind: str
    """"json", "text" or "binary" (only for the media types a model names in `binary_types`)."""
    value: Any
    """The parsed JSON value, the decoded text, or the raw bytes."""


def media_type(content_type: str | None) -> str:
    """'Application/JSON; charset=utf-8' → 'application/json'."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def request_header(headers: Mapping[str, Any] | None, name: str) -> str | None:
    """A request header's value, looked up case-insensitively (TorchServe keeps the client's case).

    The frontend reads header bytes as Latin-1; a client that sent UTF-8 gets its own text back in
    error messages rather than mojibake."""
    name = name.lower()
    for key, value in (headers or {}).items():
        if isinstance(key, str) and key.lower() == name and isinstance(value, str | bytes):
            return _as_sent(value.decode("latin-1") if isinstance(value, bytes) else value)
    return None


def _as_sent(value: str) -> str:
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


def request_content_type(headers: Mapping[str, Any] | None) -> str:
    """The media type of the HTTP request itself."""
    return media_type(request_header(headers, "content-type"))


IDENTITY_ENCODINGS = ("", "identity")


def reject_content_encoding(headers: Mapping[str, Any] | None) -> None:
    """TorchServe hands compressed bodies over still compressed: name the encoding (415) rather
    than fail later on "not valid UTF-8"."""
    encoding = (request_header(headers, "content-encoding") or "").strip().lower()
    if encoding not in IDENTITY_ENCODINGS:
        raise UnsupportedMediaType(
            f"content encoding {encoding!r} is not supported; send the body uncompressed"
        )


def to_text(value: bytes | bytearray | str) -> str:
    if isinstance(value, str):
        return value
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        raise BadEncoding("the body is not valid UTF-8") from None


_NUMBER_SHAPES = bytes(48 if 48 <= i <= 57 else 46 if i in b".eE" else 32 for i in range(256))
"""bytes.translate table: ASCII digits to "0", ".", "e" and "E" to ".", everything else a space."""
_LONG_RUN = b" " + b"0" * 19
"""After translation: a digit run of 19 or more that no "." (a fraction's digits) precedes.
orjson reads every integer of up to 18 digits exactly; a longer one may come back a float."""


def _may_hold_long_integer(raw: bytes | bytearray) -> bool:
    """True when the body may hold an integer literal of 19 digits or more (no fraction or
    exponent after it: floats read the same in both parsers). Substring searches in C; small
    floats' long fraction digits follow a "." and never match."""
    shapes = b" " + raw.translate(_NUMBER_SHAPES)
    at = shapes.find(_LONG_RUN)
    while at != -1:
        end = at + len(_LONG_RUN)
        while end < len(shapes) and shapes[end] == 48:  # the rest of the run
            end += 1
        if end == len(shapes) or shapes[end] != 46:  # not followed by a fraction or exponent
            return True
        at = shapes.find(_LONG_RUN, end)
    return False


def parse_json(value: bytes | bytearray | str) -> Any:
    """Parse a body that should be JSON: what `json.loads` makes of it, or BadEncoding.

    orjson parses first (several times faster than `json`) unless a run of 19
    digits could be an integer past 64 bits, which orjson reads as a float where `json` keeps the
    int. What orjson refuses goes to `json`, which decides: the NaN/Infinity literals (the
    validators refuse them with a reason), numbers past a double's range, lone surrogates, and
    every malformed body, whose error message comes from `json` as before."""
    try:
        raw = value.encode("utf-8") if isinstance(value, str) else value
    except UnicodeEncodeError:  # lone surrogates: json decides
        raw = None
    if raw is not None and not _may_hold_long_integer(raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    text = to_text(value)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise BadEncoding(f"the body is not valid JSON ({e.msg} at position {e.pos})") from None
    except (ValueError, RecursionError):
        # Integers over Python's 4300-digit limit and nesting deeper than the recursion limit.
        raise BadEncoding(
            "the body is not usable JSON (a number too long or nesting too deep)"
        ) from None


def decode(value: Any, content_type: str = "", binary_types: tuple[str, ...] = ()) -> Payload:
    """Decode one body given its media type (see `content_type_of`); a body of one of the
    `binary_types` stays bytes (a model that reads raw arrays names its types)."""
    kind = media_type(content_type)
    if isinstance(value, (dict, list, int, float, bool)) or value is None:
        # Only TorchServe's own JSON parsing produces these.
        return Payload("json", value)
    if kind in binary_types and isinstance(value, bytes | bytearray):
        return Payload("binary", bytes(value))
    if kind == "application/json" or kind.endswith("+json"):
        if isinstance(value, str) and kind == "application/json":
            # TorchServe parsed the body and it was a JSON string: `"text"`, not an object.
            return Payload("json", value)
        return Payload("json", parse_json(value))
    if kind.startswith("text/"):
        return Payload("text", to_text(value))
    if kind in SNIFFED_TYPES:
        text = to_text(value)
        if text.lstrip().startswith(("{", "[")):
            return Payload("json", parse_json(text))
        return Payload("text", text)
    raise UnsupportedMediaType(
        f"content type {kind!r} is not supported; send {_accepted(binary_types)}"
    )


def _accepted(binary_types: tuple[str, ...]) -> str:
    return " or ".join(("application/json", "text/plain", *binary_types[:1]))


FORM_TYPE = "application/x-www-form-urlencoded"


def body_media_type(request: Request) -> str:
    """The body's media type: the request's own (`Request.media_type`, set by the adapter), else
    its Content-Type header's. A multipart request's header describes the envelope, not the body:
    such a body without its own type is sniffed ("")."""
    if request.media_type is not None:
        return media_type(request.media_type)
    top = request_content_type(request.headers)
    return "" if top.startswith("multipart/") else top


def request_body(
    request: Request, reads_parts: bool = False, binary_types: tuple[str, ...] = ()
) -> tuple[Any, str]:
    """(body, media type) of one request, or raise a RequestError: the one request layer of every
    model (content encoding, a missing body, a form of several parts).

    `reads_parts`: the model reads named parts beside the body as parameters; otherwise a
    multipart form of several parts is a 400, since the model would read one and drop the rest
    unseen. `binary_types` only names what the model accepts in the messages."""
    headers = request.headers
    reject_content_encoding(headers)
    parts = len(request.parts)
    if request.body is None:
        if not parts and request_content_type(headers) == FORM_TYPE:
            # Servers drop url-encoded form bodies (what `curl -d` sends) before the model.
            raise UnsupportedMediaType(
                f"form-encoded bodies are not supported; send {_accepted(binary_types)}"
            )
        if parts:
            raise BadField(
                f"expected one body, got {parts} form parts; send the body as the whole request"
            )
        raise BadField("the request has no body")
    if parts and not reads_parts and request_content_type(headers).startswith("multipart/"):
        raise BadField(
            f"expected one body, got a multipart request of {parts + 1} parts; send the body as "
            "the whole request (or a form of one part)"
        )
    return request.body, body_media_type(request)


def decode_request(request: Request, binary_types: tuple[str, ...] = ()) -> Payload:
    """One request → Payload, or raise a RequestError. With `binary_types` the model reads named
    parts beside the body too (see `request_body`)."""
    value, kind = request_body(request, bool(binary_types), binary_types)
    return decode(value, kind, binary_types)


@dataclass(frozen=True)
class Reply:
    """One answer on the wire: body, content type and extra response headers (ASCII only)."""

    body: str | bytes
    content_type: str
    headers: dict[str, str]
