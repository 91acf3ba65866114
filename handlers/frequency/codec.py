"""Wire format → `SignalRequest`: a JSON object, or a raw little-endian float32 body
(application/octet-stream) whose parameters come in headers (`X-Sample-Rate`, `X-Frequencies: 1,3`).

TorchServe hands each request over as a dict: the body under "body" (or "data"), already
JSON-decoded when the content type is application/json. Query parameters would arrive as extra
keys and are read too, but TorchServe 0.12's /predictions route does not forward them (measured:
it parses the request with a null query decoder), so clients must use the headers.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from numbers import Real

import numpy as np

from handlers.codec import content_type_of, reject_content_encoding
from handlers.errors import BadEncoding, BadField, EmptyInput, TooLarge, UnsupportedMediaType
from handlers.frequency.settings import FrequencySettings

BINARY_TYPES = ("application/octet-stream", "application/x-float32")


@dataclass(frozen=True)
class SignalRequest:
    signal: np.ndarray
    """(N,) float32 samples."""
    sample_rate: int
    frequencies: tuple[float, ...]
    """Requested frequencies, in request order, without repeats."""
    selectors: tuple[int, ...]
    """Index of each requested frequency in the served list (the one-hot position)."""


def _text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise BadEncoding("a request parameter is not UTF-8") from None
    return str(value)


def _header(headers: dict, name: str) -> str | None:
    name = name.lower()
    for k, v in headers.items():
        if isinstance(k, str) and k.lower() == name and not isinstance(v, dict):
            return _text(v)
    return None


def _content_type(row: dict, headers: dict) -> str:
    return content_type_of(headers, "data" if "body" not in row and "data" in row else "body")


def _float_list(values, field: str) -> np.ndarray:
    if not isinstance(values, list):
        raise BadField(f"'{field}' must be a JSON array of numbers")
    # bool is a Real in Python; true/false in a signal is a client bug, not 1.0/0.0.
    if not all(isinstance(v, Real) and not isinstance(v, bool) for v in values):
        raise BadField(f"'{field}' must contain only numbers")
    return np.asarray(values, dtype=np.float64)


_ASCII_NUMBER = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*", re.ASCII)
"""A number written in a header or a comma list: ASCII digits only (Python's float() also takes
'١٠' and '1_000', which no client means)."""


def _number(value, field: str) -> float:
    """A JSON number, or a number written in ASCII (headers carry text)."""
    if isinstance(value, Real) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and _ASCII_NUMBER.fullmatch(value):
        return float(value)
    raise BadField(f"'{field}' must be a number written with ASCII digits")


def _sample_rate(value, settings: FrequencySettings) -> int:
    if value is None:
        return settings.sample_rate
    rate = _number(value, "sample_rate")
    if rate != settings.sample_rate:
        raise BadField(
            f"unsupported sample_rate {value!r}: this model serves {settings.sample_rate} Hz"
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


def decode_request(row: dict, headers: dict, settings: FrequencySettings) -> SignalRequest:
    """One TorchServe request → a validated SignalRequest, or a RequestError."""
    reject_content_encoding(headers)
    body = row.get("body", row.get("data"))
    if body is None:
        if row:
            raise BadField(
                f"expected one body (JSON or float32), got {len(row)} form parts; "
                "send the signal as the whole body"
            )
        raise EmptyInput("the request has no body")
    ctype = _content_type(row, headers)
    if isinstance(body, bytes | bytearray) and ctype in BINARY_TYPES:
        raw = bytes(body)
        if len(raw) % 4:
            raise BadEncoding(f"a float32 body must be a multiple of 4 bytes, got {len(raw)}")
        signal = np.frombuffer(raw, dtype="<f4").astype(np.float64)
        params = {
            "sample_rate": _text(row.get("sample_rate")) or _header(headers, "x-sample-rate"),
            "frequencies": _text(row.get("frequencies")) or _header(headers, "x-frequencies"),
        }
        rate = _sample_rate(params["sample_rate"], settings)
        freqs, selectors = _frequencies(params["frequencies"], settings)
        return SignalRequest(_checked_signal(signal, settings), rate, freqs, selectors)
    if isinstance(body, bytes | bytearray | str):
        if ctype and ctype != "application/json" and not ctype.startswith("text/"):
            raise UnsupportedMediaType(f"content type {ctype!r} is not JSON or {BINARY_TYPES[0]}")
        try:
            body = json.loads(_text(body))
        except (ValueError, RecursionError, BadEncoding):
            raise BadEncoding("the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise BadField("the JSON body must be an object with a 'signal' array")
    if "signal" not in body:
        raise BadField("the JSON body has no 'signal' field")
    signal = _float_list(body["signal"], "signal")
    rate = _sample_rate(body.get("sample_rate"), settings)
    freqs, selectors = _frequencies(body.get("frequencies"), settings)
    return SignalRequest(_checked_signal(signal, settings), rate, freqs, selectors)


def json_floats(x: np.ndarray, decimals: int = 7) -> list[float]:
    """float32 samples as short JSON numbers, rounded far below the 1e-5 streaming tolerance."""
    return np.round(x.astype(np.float64), decimals).tolist()
