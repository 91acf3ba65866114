"""Signal requests → typed extractions → response bodies: windows or stream steps through the
runtime, the MC-dropout std band, and the stream state the client carries to its next chunk.
Used by the TorchServe handler and, unchanged, in-process by tests and tools.

One-shot requests of a batch share one runtime call (all their windows); stream chunks share one
call per chunk length, each starting from the state its client sent. Nothing outlives a request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson

from handlers.codec import Reply
from handlers.errors import BadField, RequestError, header_value
from handlers.frequency.codec import SignalRequest
from handlers.frequency.engine import Components, FrequencyEngine
from handlers.frequency.settings import FrequencySettings, parse_settings
from handlers.frequency.state import StateCodec, StreamState, load_key
from handlers.frequency.windowing import num_windows
from handlers.predictor import Predictor

STATE_HEADER = "X-Stream-State"


@dataclass(frozen=True)
class Extraction:
    """The answer to one request; it serialises itself (`reply`: JSON or float32)."""

    frequencies: tuple[float, ...]
    components: Components
    windows: int | None
    """Windows a one-shot request was split into (None for a stream chunk)."""
    state: str | None = None
    """The stream's state after this chunk, for the client's next one (None: one-shot)."""
    samples_seen: int | None = None
    binary: bool = False
    """Answer as float32 (the client sent Accept: application/octet-stream)."""
    sample_rate: int | None = None
    """The served sample rate, reported in the answer."""
    model: Mapping[str, str] = field(default_factory=dict)
    """The `model` block of the answer (name, version)."""

    def to_body(self) -> dict:
        """The JSON answer (docs/clients.md); the sample arrays stay float32 numpy rows."""
        comp = self.components
        body: dict = {
            "sample_rate": self.sample_rate,
            "components": [
                {"frequency": f, "signal": comp.signal[j], "std": comp.std[j]}
                for j, f in enumerate(self.frequencies)
            ],
            "model": dict(self.model),
        }
        if self.state is not None:
            body["state"] = self.state
            body["samples_seen"] = self.samples_seen
        return body

    def to_json(self) -> bytes:
        # orjson writes each float32 as the shortest text that reads back as that float32
        # (exact, and 20x faster than json.dumps over rounded Python floats: 1 ms vs 21 ms
        # for 2,000 samples x 4 frequencies). The JSON is ASCII.
        return orjson.dumps(self.to_body(), option=orjson.OPT_SERIALIZE_NUMPY)

    def reply(self) -> Reply:
        """Body, content type and headers; JSON unless the client accepts float32.

        The float32 answer is (2, F, N) little-endian: the signals, then the std bands, one row
        per frequency in X-Frequencies order; its headers describe the layout. A stream's state
        is in the X-Stream-State header of every answer, and in the body of a JSON one.
        """
        stream = {}
        if self.state is not None:
            # Our own URL-safe base64: ASCII by construction, never client text.
            stream = {STATE_HEADER: self.state, "X-Samples-Seen": str(self.samples_seen)}
        if not self.binary:
            return Reply(self.to_json(), "application/json", stream)
        comp = self.components
        data = np.stack([comp.signal, comp.std]).astype("<f4", copy=False)
        headers = {
            "X-Shape": ",".join(str(d) for d in data.shape),
            "X-Layout": "band,frequency,sample float32le; bands signal,std",
            "X-Frequencies": ",".join(f"{f:g}" for f in self.frequencies),
            "X-Sample-Rate": str(self.sample_rate),
            "X-Model-Version": header_value(str(self.model.get("version", ""))),
        }
        return Reply(data.tobytes(), "application/octet-stream", headers | stream)


_PENDING = RequestError("not answered")
"""A placeholder every good request's answer replaces (predict fills all of them)."""


class FrequencyPredictor(Predictor[FrequencySettings]):
    model = "frequency"
    parse_settings = staticmethod(parse_settings)

    def __init__(
        self,
        model_dir: str | Path,
        settings: FrequencySettings,
        device: str = "cpu",
        name: str | None = None,
        *,
        state_key: bytes | None = None,
    ):
        """`state_key` signs stream states; None reads the deployment's key file (load_key)."""
        super().__init__(model_dir, settings, device, name)
        self.engine = FrequencyEngine(settings, model_dir, device)
        self.states = StateCodec(
            state_key if state_key is not None else load_key(),
            settings.version,
            settings.layers,
            settings.hidden,
            len(settings.frequencies),
        )

    def predict(
        self, requests: list[SignalRequest | RequestError]
    ) -> list[Extraction | RequestError]:
        """One answer per request, in order; a refused one stays its RequestError."""
        results: list[Extraction | RequestError] = [
            r if isinstance(r, RequestError) else _PENDING for r in requests
        ]
        one_shot = [
            (i, r)
            for i, r in enumerate(requests)
            if isinstance(r, SignalRequest) and not r.streaming
        ]
        s = self.settings
        for (i, req), comp in zip(
            one_shot, self.engine.windows([r for _, r in one_shot]), strict=True
        ):
            n = num_windows(req.signal.shape[0], s.window, s.hop)
            results[i] = Extraction(
                req.frequencies, comp, n, binary=req.binary_answer, **self._served()
            )
        chunks, idxs = [], []
        for i, r in enumerate(requests):
            if isinstance(r, SignalRequest) and r.streaming:
                try:
                    chunks.append(self._continue(r))
                    idxs.append((i, r.binary_answer))
                except RequestError as err:
                    results[i] = err
        for (i, binary), (comp, state) in zip(idxs, self.engine.stream(chunks), strict=True):
            results[i] = Extraction(
                state.frequencies,
                comp,
                None,
                self.states.encode(state),
                state.samples_seen,
                binary,
                **self._served(),
            )
        return results

    def _continue(self, req: SignalRequest) -> tuple[SignalRequest, StreamState]:
        """The chunk and the state it starts from; a continuation keeps its stream's frequencies."""
        if req.start:
            return req, self.engine.zero_state(req)
        state = self.states.decode(req.state, self.settings.frequencies)
        if req.frequencies_given and req.frequencies != state.frequencies:
            raise BadField(
                f"this stream extracts {list(state.frequencies)}; a chunk cannot change them "
                "(leave 'frequencies' out, or start a new stream)"
            )
        return SignalRequest(req.signal, req.sample_rate, state.frequencies, state.selectors), state

    def _served(self) -> dict:
        return {"sample_rate": self.settings.sample_rate, "model": self.model_info}

    def body(self, answer: Extraction) -> dict:
        """The JSON answer (`Extraction.to_body`)."""
        return answer.to_body()

    def reply(self, answer: Extraction) -> Reply:
        """Body, content type and headers of one answer (`Extraction.reply`)."""
        return answer.reply()
