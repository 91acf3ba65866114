"""This model from the client side: one-shot calls and streams that carry their state, over the
signal kit's client codec (clients/kits/signal.py), the other side of the codec the server itself
decodes with (handlers/kits/signal/codec.py).

    from clients import connect
    from tools.frequency.client import SignalStream
    with connect("grpc") as client:
        stream = SignalStream(client, frequencies=(1, 3))
        for chunk in chunks:                # any length, any number
            answer = stream.send(chunk)     # Extraction: .signal / .std (F, n) for this chunk
        stream.state                        # the opaque state after the last chunk

The server keeps nothing between chunks: each answer carries the stream's state, the next chunk
sends it back, so any replica can answer any chunk. `float32=True` (REST only: gRPC carries no
headers) sends raw float32 bodies and reads float32 answers, whose layout is in their headers.
`band=False` asks for the signals alone (no std band: half the answer; `.std` is then None).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from clients.kits import signal as codec
from clients.kits.signal import SignalAnswer
from handlers.kits.signal.codec import FLOAT32, STATE_HEADER

MODEL = "frequency"
__all__ = ["FLOAT32", "MODEL", "STATE_HEADER", "Extraction", "SignalStream", "extract"]


class Extraction(SignalAnswer):
    """A decoded answer (clients.kits.signal.SignalAnswer) with the readers clients call it by."""

    @classmethod
    def from_json(cls, answer: dict) -> Extraction:
        return cls(**vars(codec.decode_answer(answer)))

    @classmethod
    def from_float32(cls, body: bytes, headers: Mapping[str, str]) -> Extraction:
        """A float32 answer: (2, F, n) little-endian, signal then std, shape in X-Shape."""
        return cls(**vars(codec.decode_answer(body, headers)))

    def to_json(self) -> dict:
        """The server's JSON shape (without the state), for printing."""
        comps: list[dict[str, Any]] = [
            {"frequency": f, "signal": s.tolist()}
            for f, s in zip(self.frequencies, self.signal, strict=True)
        ]
        if self.std is not None:
            for c, d in zip(comps, self.std, strict=True):
                c["std"] = d.tolist()
        out: dict[str, Any] = {
            "components": comps,
            "model_version": self.model_version,
            "residual": self.residual,
            "nonstationarity": self.nonstationarity,
            "offset": self.offset,
            "out_of_distribution": self.out_of_distribution,
        }
        if self.samples_seen is not None:
            out["samples_seen"] = self.samples_seen
        return out


def _check_float32(client) -> None:
    if client.protocol != "rest":
        raise ValueError("float32 bodies need REST: gRPC carries no request or answer headers")


def _samples(x) -> np.ndarray:
    return np.asarray(list(x) if not isinstance(x, np.ndarray) else x, np.float32)


def _call(client, model: str, float32: bool, **request) -> Extraction:
    if float32:
        r = client.post(model, *codec.request_float32(**request))
        return Extraction.from_float32(r.content, r.headers)
    return Extraction.from_json(client.predict(model, codec.request_json(**request)))


def extract(
    client,
    signal: Iterable[float],
    frequencies: Iterable[float] | None = None,
    sample_rate: float | None = None,
    model: str = MODEL,
    float32: bool = False,
    band: bool = True,
) -> Extraction:
    """One-shot extraction of a whole signal (`band` False: without the std band)."""
    if float32:
        _check_float32(client)
    return _call(
        client, model, float32,
        signal=_samples(signal), frequencies=frequencies, sample_rate=sample_rate, band=band,
    )  # fmt: skip


class SignalStream:
    """One stream of chunks; `state` is all there is of it between calls (save it to resume)."""

    def __init__(
        self,
        client,
        frequencies: Iterable[float] | None = None,
        sample_rate: float | None = None,
        model: str = MODEL,
        float32: bool = False,
        state: str | None = None,
        band: bool = True,
    ):
        if float32:
            _check_float32(client)
        self.client = client
        self.frequencies = tuple(frequencies) if frequencies is not None else None
        self.sample_rate = sample_rate
        self.model = model
        self.float32 = float32
        self.band = band
        self.state = state
        """None until the first answer (or the state of a stream to resume)."""

    def send(self, chunk: Iterable[float]) -> Extraction:
        # A continuation keeps its stream's frequencies: only the first chunk names them.
        answer = _call(
            self.client, self.model, self.float32,
            signal=_samples(chunk),
            frequencies=self.frequencies if self.state is None else None,
            sample_rate=self.sample_rate, stream=self.state is None, state=self.state,
            band=self.band,
        )  # fmt: skip
        self.state = answer.state
        return answer
