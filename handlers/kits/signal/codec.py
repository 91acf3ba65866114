"""The signal kit's wire contract, the server's side: it decodes requests and encodes answers
with it. The client's side (`request_json` / `request_float32`, `decode_answer`), which clients,
bench, the load tests and the rehearsal use, is clients/kits/signal.py, over the header names
and types here. A signal model serves a fixed sample rate and a list of frequencies (the
components, or bands, it extracts); a request names the ones it wants.

Wire format → `SignalRequest`: a JSON object, or a raw little-endian float32 body
(application/octet-stream) whose parameters come in headers (`X-Sample-Rate`, `X-Frequencies: 1,3`).

Streams (docs/clients.md): a JSON body starts one with `"stream": true` and continues it with
`"state": "<the previous answer's state>"`; a float32 body does the same with the `X-Stream: start`
and `X-Stream-State: <state>` headers. `Accept: application/octet-stream` asks for a float32 answer.

The band: every answer carries each component's `std` band unless the request says `"band": false`
(JSON) or `X-Band: false` (float32); the answer then holds the signals alone (half the size) and
the server does not compute the band.

The server hands each request over as a `Request` (handlers/service.py): the body (handlers/codec.py
decodes it, as for every model) and named parts beside it (gRPC inputs, form fields), which a
float32 request reads as parameters too; TorchServe 0.12's /predictions route does not forward the
query string (measured: it parses the request with a null query decoder), so REST clients use
headers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from numbers import Real
from typing import TYPE_CHECKING, Any

import numpy as np

from handlers import codec
from handlers.codec import request_header
from handlers.errors import BadEncoding, BadField, EmptyInput, TooLarge, echo, header_value
from handlers.kits.signal.settings import SignalSettings

if TYPE_CHECKING:
    from handlers.kits.signal.predict import Extraction
    from handlers.service import Request

FLOAT32 = "application/octet-stream"
BINARY_TYPES = (FLOAT32, "application/x-float32")
# Header names as sent; servers look them up case-insensitively (handlers/codec.request_header).
STREAM_HEADER = "X-Stream"
STATE_HEADER = "X-Stream-State"
FREQUENCIES_HEADER = "X-Frequencies"
SAMPLE_RATE_HEADER = "X-Sample-Rate"
SHAPE_HEADER = "X-Shape"
SAMPLES_SEEN_HEADER = "X-Samples-Seen"
VERSION_HEADER = "X-Model-Version"
OOD_HEADER = "X-Out-Of-Distribution"
RESIDUAL_HEADER = "X-Residual"
NONSTATIONARITY_HEADER = "X-Nonstationarity"
OFFSET_HEADER = "X-Offset"
BAND_HEADER = "X-Band"
LAYOUT_HEADER = "X-Layout"
LAYOUT = "band,frequency,sample float32le; bands signal,std"
LAYOUT_SIGNAL = "band,frequency,sample float32le; bands signal"
"""The float32 answer without the band (`X-Band: false`): (1, F, N), the signals alone."""


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
    band: bool = True
    """Answer each component's std band (False: the signals alone; the band is not computed)."""

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


def _param(request: Request, name: str) -> str | None:
    """A parameter of a float32 request: a form field / gRPC input, else the X- header."""
    parts = request.parts
    value = parts.get(name)
    if value is None:
        value = parts.get(f"x-{name.replace('_', '-')}")
    if value is None:
        return request_header(request.headers, f"x-{name.replace('_', '-')}")
    return _text(value)


def wants_binary(headers: Mapping[str, Any]) -> bool:
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


def _sample_rate(value, settings: SignalSettings) -> int:
    served = settings.sample_rate
    if value is None:
        return served
    rate = _number(value, "sample_rate")
    if rate != served:
        raise BadField(f"unsupported sample_rate {echo(value)}: this model serves {served} Hz")
    return served


def _frequencies(value, settings: SignalSettings) -> tuple[tuple[float, ...], tuple[int, ...]]:
    offered = settings.frequencies
    if value is None:
        return offered, tuple(range(len(offered)))
    if isinstance(value, str):
        value = [_number(v, "frequencies") for v in value.split(",") if v.strip()]
    freqs = _float_list(value, "frequencies")
    if freqs.size == 0:
        raise BadField("'frequencies' must not be empty")
    chosen: list[float] = []
    for f in freqs.tolist():
        if f not in offered:
            served = ", ".join(f"{s:g}" for s in offered)
            raise BadField(f"unsupported frequency {f:g} Hz: this model extracts {served}")
        if f not in chosen:
            chosen.append(f)
    return tuple(chosen), tuple(offered.index(f) for f in chosen)


def _priced(samples: int, settings: SignalSettings) -> None:
    """A signal over the limit is refused from its length, before it is converted (a 6 MB body
    is 1.6 million samples)."""
    if samples > settings.max_samples:
        raise TooLarge(f"'signal' has {samples} samples; the limit is {settings.max_samples}")


def _checked_signal(signal: np.ndarray) -> np.ndarray:
    if signal.ndim != 1:
        raise BadField("'signal' must be a flat array of samples")
    if signal.size == 0:
        raise EmptyInput("'signal' is empty")
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


def _band(value) -> bool:
    """The JSON `band` field: true (the default) or false."""
    if value is None:
        return True
    if not isinstance(value, bool):
        raise BadField(f"'band' must be true or false, not {echo(value)}")
    return value


def _binary_band(request: Request) -> bool:
    """The X-Band header (or the `band` part): true (the default) or false."""
    value = _param(request, "band")
    if value is None:
        return True
    word = value.strip().lower()
    if word not in ("true", "false"):
        raise BadField(f"X-Band must be true or false, not {echo(value)}")
    return word == "true"


def _binary_stream(request: Request) -> tuple[bool, str | None]:
    start = _param(request, "stream")
    if start is not None and start.strip().lower() != "start":
        raise BadField("X-Stream must be 'start' (continue a stream with X-Stream-State)")
    state = _param(request, "stream_state")
    return _stream_fields(True if start is not None else None, state)


@dataclass(frozen=True)
class SignalInput:
    """A request read from tensors (the kit's tensor form, handlers/kits/signal/oip.py), its
    parameters as a float32 request's headers carry them, not yet checked: `checked` is the
    SignalRequest a float32 body with those headers makes, with the same checks and messages."""

    signal: np.ndarray
    """(N,) float32 samples."""
    sample_rate: str | None = None
    frequencies: str | None = None
    """"1,3" (None: every served one)."""
    start: bool = False
    state: str | None = None
    band: bool = True

    def checked(self, settings: SignalSettings) -> SignalRequest:
        """(Its answer is written as tensors: `binary_answer`, as the float32 request asks.)"""
        _priced(self.signal.size, settings)
        signal = np.asarray(self.signal, "<f4").astype(np.float64)
        rate = _sample_rate(self.sample_rate, settings)
        freqs, selectors = _frequencies(self.frequencies, settings)
        start, state = _stream_fields(True if self.start else None, self.state)
        return SignalRequest(
            _checked_signal(signal), rate, freqs, selectors,
            start, state, self.frequencies is not None, True, self.band,
        )  # fmt: skip


def decode_request(request: Request, settings: SignalSettings) -> SignalRequest:
    """One request → a validated SignalRequest, or a RequestError (a typed one, read from
    tensors, is checked as its float32 body would be)."""
    if isinstance(request.typed, SignalInput):
        return request.typed.checked(settings)
    payload = codec.decode_request(request, binary_types=BINARY_TYPES)
    binary = wants_binary(request.headers)
    if payload.kind == "binary":
        raw = payload.value
        if len(raw) % 4:
            raise BadEncoding(f"a float32 body must be a multiple of 4 bytes, got {len(raw)}")
        _priced(len(raw) // 4, settings)
        signal = np.frombuffer(raw, dtype="<f4").astype(np.float64)
        rate = _sample_rate(_param(request, "sample_rate"), settings)
        named = _param(request, "frequencies")
        freqs, selectors = _frequencies(named, settings)
        start, state = _binary_stream(request)
        return SignalRequest(
            _checked_signal(signal), rate, freqs, selectors,
            start, state, named is not None, binary, _binary_band(request),
        )  # fmt: skip
    # A text body is JSON sent as text/plain (curl's default); this model reads no prose.
    body = codec.parse_json(payload.value) if payload.kind == "text" else payload.value
    if not isinstance(body, dict):
        raise BadField("the JSON body must be an object with a 'signal' array")
    if "signal" not in body:
        raise BadField("the JSON body has no 'signal' field")
    if isinstance(body["signal"], list):
        _priced(len(body["signal"]), settings)
    signal = _float_list(body["signal"], "signal")
    rate = _sample_rate(body.get("sample_rate"), settings)
    freqs, selectors = _frequencies(body.get("frequencies"), settings)
    start, state = _stream_fields(body.get("stream"), body.get("state"))
    band = _band(body.get("band"))
    return SignalRequest(
        _checked_signal(signal), rate, freqs, selectors,
        start, state, body.get("frequencies") is not None, binary, band,
    )  # fmt: skip


def frequency_list(frequencies: Iterable[float]) -> str:
    """Frequencies as the X-Frequencies header writes them: "1,3"."""
    return ",".join(f"{float(f):g}" for f in frequencies)


# --- answers out -------------------------------------------------------------------------


def stream_headers(state: str | None, samples_seen: int | None) -> dict[str, str]:
    """A stream's state travels in every answer's headers (and in a JSON body)."""
    if state is None:
        return {}
    return {STATE_HEADER: state, SAMPLES_SEEN_HEADER: str(samples_seen)}


def answer_json(answer: Extraction) -> dict:
    """The JSON answer (docs/clients.md); the sample arrays stay float32 numpy rows. Asked without
    the band (`std` None), the components carry no `std`."""
    a, signal, std = answer, answer.components.signal, answer.components.std
    comps = [{"frequency": f, "signal": signal[j]} for j, f in enumerate(a.frequencies)]
    if std is not None:
        for j, comp in enumerate(comps):
            comp["std"] = std[j]
    body: dict = {
        "sample_rate": a.sample_rate,
        "out_of_distribution": a.out_of_distribution,
        "residual": a.residual,
        "nonstationarity": a.nonstationarity,
        "offset": a.offset,
        "components": comps,
        "model": dict(a.model),
    }
    if a.state is not None:
        body["state"] = a.state
        body["samples_seen"] = a.samples_seen
    return body


def answer_float32(answer: Extraction) -> tuple[bytes, dict[str, str]]:
    """The float32 answer: (2, F, N) little-endian, the signals then the std bands, one row per
    frequency in X-Frequencies order; its headers describe the layout. Asked without the band
    (`std` None): (1, F, N), the signals alone."""
    a, signal, std = answer, answer.components.signal, answer.components.std
    data = np.stack([signal] if std is None else [signal, std]).astype("<f4", copy=False)
    ood = a.out_of_distribution
    headers = {
        SHAPE_HEADER: ",".join(str(d) for d in data.shape),
        LAYOUT_HEADER: LAYOUT_SIGNAL if std is None else LAYOUT,
        FREQUENCIES_HEADER: frequency_list(a.frequencies),
        SAMPLE_RATE_HEADER: str(a.sample_rate),
        VERSION_HEADER: header_value(str(a.model.get("version", ""))),
        OOD_HEADER: "null" if ood is None else str(ood).lower(),
        RESIDUAL_HEADER: _figure(a.residual),
        NONSTATIONARITY_HEADER: _figure(a.nonstationarity),
        OFFSET_HEADER: _figure(a.offset),
    }
    return data.tobytes(), headers | stream_headers(a.state, a.samples_seen)


def _figure(value: float | None) -> str:
    return "null" if value is None else f"{value:.6g}"
