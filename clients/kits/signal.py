"""The signal kit's wire contract from the client's side: a request's body (`request_json`,
`request_float32`) and its answer read back (`decode_answer` → `SignalAnswer`). The server's
side, with the format's description, its header names and request types, is
handlers/kits/signal/codec.py; clients, bench, the load tests and the rehearsal use this one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from handlers.codec import request_header
from handlers.kits.signal.codec import (
    BAND_HEADER,
    FLOAT32,
    FREQUENCIES_HEADER,
    NONSTATIONARITY_HEADER,
    OFFSET_HEADER,
    OOD_HEADER,
    RESIDUAL_HEADER,
    SAMPLE_RATE_HEADER,
    SAMPLES_SEEN_HEADER,
    SHAPE_HEADER,
    STATE_HEADER,
    STREAM_HEADER,
    VERSION_HEADER,
    frequency_list,
)


def request_json(
    signal,
    frequencies: Iterable[float] | None = None,
    sample_rate: float | None = None,
    stream: bool = False,
    state: str | None = None,
    band: bool = True,
) -> dict[str, Any]:
    """The JSON body of a request (REST or gRPC): a stream starts with `stream`, goes on with the
    previous answer's `state`; `band` False asks for the signals without their std band."""
    body: dict[str, Any] = {"signal": np.asarray(signal, np.float32).tolist()}
    if frequencies is not None:
        body["frequencies"] = [float(f) for f in frequencies]
    if sample_rate is not None:
        body["sample_rate"] = sample_rate
    if state is not None:
        body["state"] = state
    elif stream:
        body["stream"] = True
    if not band:
        body["band"] = False
    return body


def request_float32(
    signal,
    frequencies: Iterable[float] | None = None,
    sample_rate: float | None = None,
    stream: bool = False,
    state: str | None = None,
    band: bool = True,
) -> tuple[bytes, dict[str, str]]:
    """A float32 request (REST only): raw samples, parameters in headers, a float32 answer
    (`band` False: the signals alone, (1, F, n))."""
    headers = {"Content-Type": FLOAT32, "Accept": FLOAT32}
    if frequencies is not None:
        headers[FREQUENCIES_HEADER] = frequency_list(frequencies)
    if sample_rate is not None:
        headers[SAMPLE_RATE_HEADER] = f"{sample_rate:g}"
    if state is not None:
        headers[STATE_HEADER] = state
    elif stream:
        headers[STREAM_HEADER] = "start"
    if not band:
        headers[BAND_HEADER] = "false"
    return np.asarray(signal, "<f4").tobytes(), headers


@dataclass(frozen=True)
class SignalAnswer:
    """One decoded answer, whichever form it came in."""

    frequencies: tuple[float, ...]
    signal: np.ndarray
    """(F, n) extracted sinusoid per frequency."""
    std: np.ndarray | None
    """(F, n) MC-dropout spread per sample (None: the request asked for no band)."""
    samples_seen: int | None = None
    """A stream's samples so far, this chunk included (None: one-shot)."""
    state: str | None = None
    model_version: str | None = None
    sample_rate: int | None = None
    out_of_distribution: bool | None = None
    """True: the input is not one the model serves (its residual is past the threshold set in
    training); None: not judged (too short, or an export without a threshold)."""
    residual: float | None = None
    """Share of the input's energy outside the served frequencies (the model's out-of-distribution judge)."""
    nonstationarity: float | None = None
    """How much the input's components change in time (None: not judged)."""
    offset: float | None = None
    """Share of the input's energy in a constant offset (None: not judged)."""


def _flag(text: str | None) -> bool | None:
    return None if text in (None, "", "null") else text == "true"


def _header_figure(text: str | None) -> float | None:
    return None if text is None or text in ("", "null") else float(text)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    return request_header(dict(headers), name)


def decode_answer(body: bytes | dict, headers: Mapping[str, str] | None = None) -> SignalAnswer:
    """A JSON answer (the parsed dict), or a float32 one: (2, F, n) little-endian, signal then
    std, or (1, F, n), the signals alone (asked without the band), its layout in the headers."""
    if isinstance(body, dict):
        comps = body["components"]
        banded = all("std" in c for c in comps)
        return SignalAnswer(
            tuple(float(c["frequency"]) for c in comps),
            np.array([c["signal"] for c in comps], dtype=np.float32),
            np.array([c["std"] for c in comps], dtype=np.float32) if banded else None,
            body.get("samples_seen"),
            body.get("state"),
            (body.get("model") or {}).get("version"),
            body.get("sample_rate"),
            body.get("out_of_distribution"),
            body.get("residual"),
            body.get("nonstationarity"),
            body.get("offset"),
        )
    headers = headers or {}
    shape = tuple(int(d) for d in (_header(headers, SHAPE_HEADER) or "").split(","))
    data = np.frombuffer(body, dtype="<f4").reshape(shape)
    seen = _header(headers, SAMPLES_SEEN_HEADER)
    rate = _header(headers, SAMPLE_RATE_HEADER)
    res = _header_figure(_header(headers, RESIDUAL_HEADER))
    return SignalAnswer(
        tuple(float(f) for f in (_header(headers, FREQUENCIES_HEADER) or "").split(",") if f),
        data[0],
        data[1] if data.shape[0] > 1 else None,
        int(seen) if seen is not None else None,
        _header(headers, STATE_HEADER),
        _header(headers, VERSION_HEADER),
        int(rate) if rate is not None else None,
        _flag(_header(headers, OOD_HEADER)),
        res,
        _header_figure(_header(headers, NONSTATIONARITY_HEADER)),
        _header_figure(_header(headers, OFFSET_HEADER)),
    )
