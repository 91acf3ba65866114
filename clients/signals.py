"""Frequency extraction from the client side: one-shot calls and streams that carry their state.

    from clients import connect
    from clients.signals import SignalStream
    with connect("grpc") as client:
        stream = SignalStream(client, frequencies=(1, 3))
        for chunk in chunks:                # any length, any number
            answer = stream.send(chunk)     # Extraction: .signal / .std (F, n) for this chunk
        stream.state                        # the opaque state after the last chunk

The server keeps nothing between chunks: each answer carries the stream's state, the next chunk
sends it back, so any replica can answer any chunk. `float32=True` (REST only: gRPC carries no
headers) sends raw float32 bodies and reads float32 answers, whose layout is in their headers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

FLOAT32 = "application/octet-stream"
STATE_HEADER = "X-Stream-State"


@dataclass(frozen=True)
class Extraction:
    frequencies: tuple[float, ...]
    signal: np.ndarray
    """(F, n) extracted sinusoid per frequency."""
    std: np.ndarray
    """(F, n) MC-dropout spread per sample."""
    samples_seen: int | None = None
    """A stream's samples so far, this chunk included (None: one-shot)."""
    state: str | None = None
    model_version: str | None = None

    @classmethod
    def from_json(cls, answer: dict) -> Extraction:
        comps = answer["components"]
        return cls(
            tuple(float(c["frequency"]) for c in comps),
            np.array([c["signal"] for c in comps], dtype=np.float32),
            np.array([c["std"] for c in comps], dtype=np.float32),
            answer.get("samples_seen"),
            answer.get("state"),
            (answer.get("model") or {}).get("version"),
        )

    @classmethod
    def from_float32(cls, body: bytes, headers: Mapping[str, str]) -> Extraction:
        """A float32 answer: (2, F, n) little-endian, signal then std, shape in X-Shape."""
        shape = tuple(int(d) for d in headers["X-Shape"].split(","))
        data = np.frombuffer(body, dtype="<f4").reshape(shape)
        seen = headers.get("X-Samples-Seen")
        return cls(
            tuple(float(f) for f in headers["X-Frequencies"].split(",")),
            data[0],
            data[1],
            int(seen) if seen is not None else None,
            headers.get(STATE_HEADER),
            headers.get("X-Model-Version"),
        )

    def to_json(self) -> dict:
        """The server's JSON shape (without the state), for printing."""
        out: dict[str, Any] = {
            "components": [
                {"frequency": f, "signal": s.tolist(), "std": d.tolist()}
                for f, s, d in zip(self.frequencies, self.signal, self.std, strict=True)
            ],
            "model_version": self.model_version,
        }
        if self.samples_seen is not None:
            out["samples_seen"] = self.samples_seen
        return out


def _params(frequencies, sample_rate) -> dict:
    out: dict[str, Any] = {}
    if frequencies is not None:
        out["frequencies"] = [float(f) for f in frequencies]
    if sample_rate is not None:
        out["sample_rate"] = sample_rate
    return out


def _float32_headers(frequencies, sample_rate) -> dict[str, str]:
    headers = {"Content-Type": FLOAT32, "Accept": FLOAT32}
    if frequencies is not None:
        headers["X-Frequencies"] = ",".join(f"{float(f):g}" for f in frequencies)
    if sample_rate is not None:
        headers["X-Sample-Rate"] = f"{sample_rate:g}"
    return headers


def _check_float32(client) -> None:
    if client.protocol != "rest":
        raise ValueError("float32 bodies need REST: gRPC carries no request or answer headers")


def extract(
    client,
    signal: Iterable[float],
    frequencies: Iterable[float] | None = None,
    sample_rate: float | None = None,
    model: str = "frequency",
    float32: bool = False,
) -> Extraction:
    """One-shot extraction of a whole signal."""
    x = np.asarray(list(signal) if not isinstance(signal, np.ndarray) else signal, np.float32)
    if float32:
        _check_float32(client)
        r = client.post(
            model, x.astype("<f4").tobytes(), _float32_headers(frequencies, sample_rate)
        )
        return Extraction.from_float32(r.content, r.headers)
    payload = {"signal": x.tolist()} | _params(frequencies, sample_rate)
    return Extraction.from_json(client.predict(model, payload))


class SignalStream:
    """One stream of chunks; `state` is all there is of it between calls (save it to resume)."""

    def __init__(
        self,
        client,
        frequencies: Iterable[float] | None = None,
        sample_rate: float | None = None,
        model: str = "frequency",
        float32: bool = False,
        state: str | None = None,
    ):
        if float32:
            _check_float32(client)
        self.client = client
        self.frequencies = tuple(frequencies) if frequencies is not None else None
        self.sample_rate = sample_rate
        self.model = model
        self.float32 = float32
        self.state = state
        """None until the first answer (or the state of a stream to resume)."""

    def send(self, chunk: Iterable[float]) -> Extraction:
        x = np.asarray(list(chunk) if not isinstance(chunk, np.ndarray) else chunk, np.float32)
        if self.float32:
            headers = _float32_headers(
                self.frequencies if self.state is None else None, self.sample_rate
            )
            headers |= {STATE_HEADER: self.state} if self.state else {"X-Stream": "start"}
            r = self.client.post(self.model, x.astype("<f4").tobytes(), headers)
            answer = Extraction.from_float32(r.content, r.headers)
        else:
            payload: dict[str, Any] = {"signal": x.tolist()}
            if self.state is None:
                payload |= {"stream": True} | _params(self.frequencies, self.sample_rate)
            else:
                payload |= {"state": self.state} | _params(None, self.sample_rate)
            answer = Extraction.from_json(self.client.predict(self.model, payload))
        self.state = answer.state
        return answer
