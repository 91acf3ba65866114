"""Wire format → `SignalRequest`: a JSON object, or a raw little-endian float32 body
(application/octet-stream) whose parameters come in headers (`X-Sample-Rate`, `X-Frequencies: 1,3`).

Streams (docs/clients.md): a JSON body starts one with `"stream": true` and continues it with
`"state": "<the previous answer's state>"`; a float32 body does the same with the `X-Stream: start`
and `X-Stream-State: <state>` headers. `Accept: application/octet-stream` asks for a float32 answer.

TorchServe hands each request over as a dict: the body under "body" (or "data"), already
JSON-decoded when the content type is application/json (handlers/codec.py decodes it, as for every
model). Other keys are gRPC inputs or form fields and are read as parameters too; TorchServe 0.12's
/predictions route does not forward the query string (measured: it parses the request with a null
query decoder), so REST clients use headers.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from numbers import Real

import numpy as np

from handlers import codec
from handlers.codec import request_header
from handlers.errors import BadEncoding, BadField, EmptyInput, TooLarge, echo
from handlers.frequency.settings import FrequencySettings

BINARY_TYPES = ("application/octet-stream", "application/x-float32")
STREAM_HEADER = "x-stream"
STATE_HEADER = "x-stream-state"


@dataclass(frozen=True)
class SignalRequest:
    signal: np.ndarray
    """(N,) float32 samples."""
    sample_rate: int
    frequencies: tuple[float, ...]
    """Requested frequencies, in request order, without repeats."""
    selectors: tuple[int, ...]
    """Index of each requested frequency in the served list (the one-hot position)."""
    start: bool = False
    """This chunk opens a stream: the answer carries the state after it."""
    state: str | None = None
    """The state token of a stream this chunk continues (as the client sent it, unchecked)."""
    frequencies_given: bool = True
    """False: the request named none (a continuation then keeps its stream's)."""
    binary_answer: bool = False
    """The client accepts a float32 answer (Accept: application/octet-stream)."""

    @property
    def streaming(self) -> bool:
        return self.start or self.state is not None


def _text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise BadEncoding("a request parameter is not UTF-8") from None
    return str(value)


def _param(row: dict, headers: dict, name: str) -> str | None:
    """A parameter of a float32 request: a form field / gRPC input, else the X- header."""
    value = row.get(name)
    if value is None:
        value = row.get(f"x-{name.replace('_', '-')}")
    if value is None:
        return request_header(headers, f"x-{name.replace('_', '-')}")
    return _text(value)


def wants_binary(headers: dict) -> bool:
    accept = request_header(headers, "accept") or ""
    return any(part.split(";")[0].strip().lower() in BINARY_TYPES for part in accept.split(","))


def _float_list(values, field: str) -> np.ndarray:
    if not isinstance(values, list):
        raise BadField(f"'{field}' must be a JSON array of numbers")
    # Parsed JSON holds only these types; bool is an int in Python, and true/false in a signal is
    # a client bug, not 1.0/0.0. (A set of types: one pass in C, not an isinstance per sample.)
    if not set(map(type, values)) <= {float, int}:
        raise BadField(f"'{field}' must contain only numbers")
    try:
        return np.asarray(values, dtype=np.float64)
    except OverflowError:  # an integer literal beyond any float (10**400)
        raise BadField(f"'{field}' has values outside the float32 range") from None


_ASCII_NUMBER = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*", re.ASCII)
"""A number written in a header or a comma list: ASCII digits only (Python's float() also takes
'١٠' and '1_000', which no client means)."""


MAX_NUMBER = 1e15
"""No parameter of this model is near this large: a bigger one (a 401-digit integer overflows a
float) is refused before any arithmetic on it."""


def _number(value, field: str) -> float:
    """A JSON number, or a number written in ASCII (headers carry text), of bounded magnitude."""
    if isinstance(value, Real) and not isinstance(value, bool):
        number = float(value) if abs(value) <= MAX_NUMBER else math.inf  # type: ignore[operator]
    elif isinstance(value, str) and len(value) <= 64 and _ASCII_NUMBER.fullmatch(value):
        number = float(value)
    else:
        raise BadField(f"'{field}' must be a number written with ASCII digits")
    if not abs(number) <= MAX_NUMBER:  # also NaN
        raise BadField(f"'{field}' is out of range: {echo(value)}")
    return number


def _sample_rate(value, settings: FrequencySettings) -> int:
    if value is None:
        return settings.sample_rate
    rate = _number(value, "sample_rate")
    if rate != settings.sample_rate:
        raise BadField(
            f"unsupported sample_rate {echo(value)}: this model serves {settings.sample_rate} Hz"
        )
    return settings.sample_rate


def _frequencies(value, settings: FrequencySettings) -> tuple[tuple[float, ...], tuple[int, ...]]:
    if value is None:
        return settings.frequencies, tuple(range(len(settings.frequencies)))
    if isinstance(value, str):
        value = [_number(v, "frequencies") for v in value.split(",") if v.strip()]
    freqs = _float_list(value, "frequencies")
    if freqs.size == 0:
        raise BadField("'frequencies' must not be empty")
    chosen: list[float] = []
    for f in freqs.tolist():
        if f not in settings.frequencies:
            served = ", ".join(f"{s:g}" for s in settings.frequencies)
            raise BadField(f"unsupported frequency {f:g} Hz: this model extracts {served}")
        if f not in chosen:
            chosen.append(f)
    return tuple(chosen), tuple(settings.frequencies.index(f) for f in chosen)


def _checked_signal(signal: np.ndarray, settings: FrequencySettings) -> np.ndarray:
    if signal.ndim != 1:
        raise BadField("'signal' must be a flat array of samples")
    if signal.size == 0:
        raise EmptyInput("'signal' is empty")
    if signal.size > settings.max_samples:
        raise TooLarge(f"'signal' has {signal.size} samples; the limit is {settings.max_samples}")
    if not np.isfinite(signal).all():
        raise BadField("'signal' contains NaN or infinite values")
    if np.abs(signal).max() > np.finfo(np.float32).max:
        raise BadField("'signal' has values outside the float32 range")
    return signal.astype(np.float32)


def _stream_fields(stream, state) -> tuple[bool, str | None]:
    if stream is not None and not isinstance(stream, bool):
        raise BadField("'stream' must be true or false")
    if state is not None and not isinstance(state, str):
        raise BadField("'state' must be the string a previous answer returned")
    if stream and state is not None:
        raise BadField("send 'stream': true to start a stream or 'state' to continue one, not both")
    return bool(stream), state


def _binary_stream(row: dict, headers: dict) -> tuple[bool, str | None]:
    start = _param(row, headers, "stream")
    if start is not None and start.strip().lower() != "start":
        raise BadField("X-Stream must be 'start' (continue a stream with X-Stream-State)")
    state = _param(row, headers, "stream_state")
    return _stream_fields(True if start is not None else None, state)


def decode_request(row: dict, headers: dict, settings: FrequencySettings) -> SignalRequest:
    """One TorchServe request → a validated SignalRequest, or a RequestError."""
    payload = codec.decode_request(row, headers, binary_types=BINARY_TYPES)
    binary = wants_binary(headers)
    if payload.kind == "binary":
        raw = payload.value
        if len(raw) % 4:
            raise BadEncoding(f"a float32 body must be a multiple of 4 bytes, got {len(raw)}")
        signal = np.frombuffer(raw, dtype="<f4").astype(np.float64)
        rate = _sample_rate(_param(row, headers, "sample_rate"), settings)
        named = _param(row, headers, "frequencies")
        freqs, selectors = _frequencies(named, settings)
        start, state = _binary_stream(row, headers)
        return SignalRequest(
            _checked_signal(signal, settings), rate, freqs, selectors,
            start, state, named is not None, binary,
        )  # fmt: skip
    # A text body is JSON sent as text/plain (curl's default); this model reads no prose.
    body = codec.parse_json(payload.value) if payload.kind == "text" else payload.value
    if not isinstance(body, dict):
        raise BadField("the JSON body must be an object with a 'signal' array")
    if "signal" not in body:
        raise BadField("the JSON body has no 'signal' field")
    signal = _float_list(body["signal"], "signal")
    rate = _sample_rate(body.get("sample_rate"), settings)
    freqs, selectors = _frequencies(body.get("frequencies"), settings)
    start, state = _stream_fields(body.get("stream"), body.get("state"))
    return SignalRequest(
        _checked_signal(signal, settings), rate, freqs, selectors,
        start, state, body.get("frequencies") is not None, binary,
    )  # fmt: skip


def json_floats(x: np.ndarray, decimals: int = 7) -> list[float]:
    """float32 samples as short JSON numbers, rounded far below the 1e-5 streaming tolerance."""
    return np.round(x.astype(np.float64), decimals).tolist()
