"""Signal requests → typed extractions → response bodies: one-shot signals through the model's
engine by windows, stream chunks continuing the state their client sent (opened, verified, and
sealed again for the next chunk), the std band, the out-of-distribution judgement.

A signal model gives the predictor an `engine` (`SignalEngine`: its windows, its zero state, its
stream step), a `states` codec (its payload in the kit's signed envelope, handlers/kits/signal/
state.py) and, if it has one, a `judge`. Nothing outlives a request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np
import orjson

from handlers.codec import Reply
from handlers.errors import BadField, RequestError
from handlers.kits.signal import codec
from handlers.kits.signal.codec import SignalRequest
from handlers.kits.signal.settings import SignalSettings
from handlers.kits.signal.windowing import num_windows
from handlers.predictor import Predictor
from handlers.tensors import Output


@dataclass(frozen=True)
class Judgement:
    """What a model's `judge` says of an input (None where not judged)."""

    residual: float | None = None
    """Share of the input's energy outside the served frequencies."""
    out_of_distribution: bool | None = None
    """Any of the figures past the threshold training set for it."""
    nonstationarity: float | None = None
    """How much the input's components change in time (0: not at all)."""
    offset: float | None = None
    """Share of the input's energy in a constant offset."""


@dataclass(frozen=True)
class Components:
    signal: np.ndarray
    """(F, N) extracted component per requested frequency."""
    std: np.ndarray | None
    """(F, N) standard deviation of each sample (the uncertainty band); None: the request asked
    for no band, and none was computed."""


class SignalEngine(Protocol):
    """What a signal model runs: every window of a batch's one-shot requests, and stream chunks
    each from its state (a state has `frequencies`, `selectors` and `samples_seen`)."""

    def windows(self, requests: list[SignalRequest]) -> list[Components]: ...
    def zero_state(self, req: SignalRequest) -> Any: ...
    def stream(self, chunks: list[tuple[SignalRequest, Any]]) -> list[tuple[Components, Any]]: ...


class StateTokens(Protocol):
    """A model's states in the kit's signed envelope."""

    def encode(self, state: Any) -> str: ...
    def decode(self, token: object, frequencies: tuple[float, ...]) -> Any: ...


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
    sample_rate: int = 0
    """The served sample rate, reported in the answer (the predictor sets it)."""
    model: Mapping[str, str] = field(default_factory=dict)
    """The `model` block of the answer (name, version)."""
    # The model's `judge` of the input (`Judgement`; a stream's: everything it has seen).
    residual: float | None = None
    out_of_distribution: bool | None = None
    nonstationarity: float | None = None
    offset: float | None = None

    def to_body(self) -> dict:
        """The JSON answer (the codec's `answer_json`); the sample arrays stay float32 rows."""
        return codec.answer_json(self)

    def to_json(self) -> bytes:
        # orjson writes each float32 as the shortest text that reads back as that float32
        # (exact, and far faster than json.dumps over rounded Python floats). The JSON is ASCII.
        return orjson.dumps(self.to_body(), option=orjson.OPT_SERIALIZE_NUMPY)

    def to_row(self) -> dict:
        """The answer as scoring writes it: the served JSON's value (each float32 sample the number
        its shortest decimal, as the JSON writes it, reads back as)."""
        body = self.to_body()
        for comp in body["components"]:
            for key in ("signal", "std"):
                if key in comp:
                    comp[key] = _as_json_reads(comp[key])
        return body

    def to_tensors(self) -> list[Output]:
        """The output tensors: the float32 answer's values (handlers/kits/signal/oip.py), its
        figures and frequencies at the 6 significant digits its headers carry."""
        comp = self.components
        out = [Output("signal", "FP32", np.ascontiguousarray(comp.signal, "<f4"))]
        if comp.std is not None:
            out.append(Output("std", "FP32", np.ascontiguousarray(comp.std, "<f4")))
        out += [
            Output("frequencies", "FP64", np.array([_g(f) for f in self.frequencies], np.float64)),
            Output("sample_rate", "INT64", np.array([self.sample_rate or 0], np.int64)),
        ]
        if self.residual is not None:
            out.append(Output("residual", "FP64", np.array([_g(self.residual)], np.float64)))
        if self.out_of_distribution is not None:
            out.append(Output("out_of_distribution", "BOOL", np.array([self.out_of_distribution])))
        for name in ("nonstationarity", "offset"):
            value = getattr(self, name)
            if value is not None:
                out.append(Output(name, "FP64", np.array([_g(value)], np.float64)))
        if self.state is not None:
            out += [
                Output("state", "BYTES", np.array([self.state.encode()], dtype=object)),
                Output("samples_seen", "INT64", np.array([self.samples_seen or 0], np.int64)),
            ]
        return out

    def reply(self) -> Reply:
        """Body, content type and headers (the codec's encoders); JSON unless the client accepts
        float32. A stream's state is in the X-Stream-State header of every answer, and in the
        body of a JSON one (our own URL-safe base64: ASCII, never client text)."""
        if not self.binary:
            return Reply(
                self.to_json(),
                "application/json",
                codec.stream_headers(self.state, self.samples_seen),
            )
        data, headers = codec.answer_float32(self)
        return Reply(data, codec.FLOAT32, headers)


def _g(value: float) -> float:
    """A figure as the float32 answer's headers carry it: 6 significant digits."""
    return float(f"{value:.6g}")


def _as_json_reads(samples: np.ndarray) -> list:
    """float32 samples as the JSON answer's numbers read back: the shortest decimal of each, read
    as a double (orjson writes numpy's float32 so, NaN and infinities as null); one C call each
    way, a seventeenth of numpy's per-element str()."""
    return orjson.loads(
        orjson.dumps(np.asarray(samples, np.float32), option=orjson.OPT_SERIALIZE_NUMPY)
    )


_PENDING = RequestError("not answered")
"""A placeholder every good request's answer replaces (predict fills all of them)."""


S = TypeVar("S", bound=SignalSettings)


class SignalPredictor(Predictor[S]):
    """The kit's predictor: a model sets `engine` and `states` when it loads."""

    engine: SignalEngine
    states: StateTokens

    def judge(self, signal: np.ndarray, state: Any = None) -> Judgement:
        """The judgement of a one-shot input (`state` None) or of a stream after its chunk
        `signal` (`state`: the stream's state after it); all None: the model does not judge."""
        return Judgement()

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
        window, hop = s.window, s.hop
        for (i, req), comp in zip(
            one_shot, self.engine.windows([r for _, r in one_shot]), strict=True
        ):
            n = num_windows(req.signal.shape[0], window, hop)
            results[i] = Extraction(
                req.frequencies, comp, n, binary=req.binary_answer, **self._served(req, None)
            )
        chunks, idxs = [], []
        for i, r in enumerate(requests):
            if isinstance(r, SignalRequest) and r.streaming:
                try:
                    chunks.append(self._continue(r))
                    idxs.append((i, r))
                except RequestError as err:
                    results[i] = err
        for (i, req), (comp, state) in zip(idxs, self.engine.stream(chunks), strict=True):
            results[i] = Extraction(
                state.frequencies,
                comp,
                None,
                self.states.encode(state),
                state.samples_seen,
                req.binary_answer,
                **self._served(req, state),
            )
        return results

    def _continue(self, req: SignalRequest) -> tuple[SignalRequest, Any]:
        """The chunk and the state it starts from; a continuation keeps its stream's frequencies."""
        if req.start:
            return req, self.engine.zero_state(req)
        state = self.states.decode(req.state, self.settings.frequencies)
        if req.frequencies_given and req.frequencies != state.frequencies:
            raise BadField(
                f"this stream extracts {list(state.frequencies)}; a chunk cannot change them "
                "(leave 'frequencies' out, or start a new stream)"
            )
        return (
            SignalRequest(
                req.signal, req.sample_rate, state.frequencies, state.selectors, band=req.band
            ),
            state,
        )

    def _served(self, req: SignalRequest, state: Any) -> dict:
        """The answer's served sample rate, model block and judgement (Extraction's fields)."""
        judged = vars(self.judge(req.signal, state))
        return {"sample_rate": self.settings.sample_rate, "model": self.model_info, **judged}
