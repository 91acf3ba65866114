"""Each model's wire contract, both sides: what a client encodes (clients/kits/), the server decodes
to the same request, and what the server encodes (its kit's codec), the client decodes to the same
answer (both codecs)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from clients.kits import signal as fclient
from clients.kits import text as sclient
from handlers import codec as shared_codec
from handlers.kits.signal import codec as fcodec
from handlers.kits.signal.predict import Components, Extraction
from handlers.kits.text import codec as scodec
from handlers.kits.text.codec import Classification
from handlers.sentiment.model import SentimentModel
from handlers.service import Request
from tools.registry import MODELS, get, names

# The three settings the codec reads (the rest is the predictor's).
FSET = SimpleNamespace(frequencies=(1.0, 3.0, 5.0, 7.0), sample_rate=1000, max_samples=4096)
SERVED = st.lists(st.sampled_from(FSET.frequencies), min_size=1, max_size=4, unique=True)
SIGNAL = st.lists(st.floats(-1e3, 1e3, allow_nan=False, width=32), min_size=1, max_size=64).map(
    lambda x: np.asarray(x, np.float32)
)
STATE = st.none() | st.text("ABCDEFabcdef0123456789-_", min_size=1, max_size=40)


def _server_decode(body, headers: dict) -> fcodec.SignalRequest:
    """What TorchServe hands the handler: a JSON body already decoded, a binary one as bytes."""
    if isinstance(body, dict):
        body = json.loads(json.dumps(body))
        headers = headers | {"Content-Type": "application/json"}
    else:
        body = bytearray(body)
    return fcodec.decode_request(Request(body, headers), FSET)


@settings(max_examples=60, deadline=None)
@given(SIGNAL, st.none() | SERVED, st.booleans(), STATE, st.booleans(), st.booleans())
def test_frequency_request_encoded_by_a_client_decodes_to_the_same_request(
    signal, frequencies, stream, state, float32, band
):
    request = dict(
        signal=signal, frequencies=frequencies, sample_rate=1000, stream=stream, state=state,
        band=band,
    )  # fmt: skip
    if float32:
        body, headers = fclient.request_float32(**request)
    else:
        body, headers = fclient.request_json(**request), {}
    got = _server_decode(body, headers)
    np.testing.assert_array_equal(got.signal, signal)
    assert got.frequencies == (tuple(frequencies) if frequencies else FSET.frequencies)
    assert got.frequencies_given == (frequencies is not None)
    assert got.state == state and got.start == (stream and state is None)
    assert got.binary_answer == float32
    assert got.band == band
    # the default leaves the wire as it was: no band field or header
    sent = fcodec.BAND_HEADER in headers if float32 else "band" in body
    assert sent == (not band)


@settings(max_examples=60, deadline=None)
@given(SERVED, st.integers(1, 32), STATE, st.booleans(), st.booleans(), st.data())
def test_frequency_answer_encoded_by_the_server_decodes_to_the_same_answer(
    frequencies, n, state, float32, band, data
):
    f = len(frequencies)
    values = st.floats(-1e6, 1e6, allow_nan=False, width=32)
    signal = np.asarray(data.draw(st.lists(values, min_size=f * n, max_size=f * n)), np.float32)
    std = np.abs(signal[::-1]).reshape(f, n)
    signal = signal.reshape(f, n)
    seen = n if state else None
    std = std if band else None  # asked without the band: the signals alone
    answer = Extraction(tuple(frequencies), Components(signal, std), None, state, seen,
                        sample_rate=1000, model={"name": "m", "version": "v"})  # fmt: skip
    if float32:
        body, headers = fcodec.answer_float32(answer)
        got = fclient.decode_answer(body, headers)
        assert got.model_version == "v"
        assert len(body) == 4 * f * n * (2 if band else 1)
        assert headers["X-Layout"] == (fcodec.LAYOUT if band else fcodec.LAYOUT_SIGNAL)
    else:
        body = fcodec.answer_json(answer)
        sent = orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)
        assert all(("std" in c) == band for c in body["components"])
        got = fclient.decode_answer(orjson.loads(sent), fcodec.stream_headers(state, seen))
        assert got.model_version == "v"
    assert got.frequencies == tuple(frequencies) and got.sample_rate == 1000
    np.testing.assert_array_equal(got.signal, signal)
    if std is None:
        assert got.std is None
    else:
        np.testing.assert_array_equal(got.std, std)
    assert got.state == state and got.samples_seen == seen


TEXT = st.text(min_size=1, max_size=40).filter(str.strip)


@settings(max_examples=60, deadline=None)
@given(st.one_of(TEXT, st.lists(TEXT, min_size=1, max_size=5)))
def test_sentiment_request_and_answer_round_trip(texts):
    sent = json.dumps(sclient.request_json(texts), ensure_ascii=False).encode()
    payload = shared_codec.decode_request(
        Request(json.loads(sent), {"Content-Type": "application/json"})
    )
    try:
        request = scodec.parse_texts(payload, max_bytes=8192, max_texts=16)
    except Exception:  # lone surrogates are refused on purpose; the client sent them as is
        assert any(
            "\ud800" <= c <= "\udfff"
            for t in ([texts] if isinstance(texts, str) else texts)
            for c in t
        )
        return
    assert request.texts == ((texts,) if isinstance(texts, str) else tuple(texts))
    assert request.many == (not isinstance(texts, str))
    results = tuple(
        {
            "label": "positive",
            "probabilities": {"negative": 0.25, "positive": 0.75},
            "uncertainty": {"entropy": 0.5, "std": 0.1, "samples": 8},
            "truncated": False,
            "model": {"name": "m", "version": "v"},
        }
        for _ in request.texts
    )
    # The answer as the server writes it (SentimentModel.reply), read back the clients' way.
    served = SentimentModel.reply(
        object.__new__(SentimentModel), Classification(results, request.many)
    )
    assert served.content_type == "application/json"
    answers = sclient.decode_answer(json.loads(served.body))
    assert isinstance(json.loads(served.body), list) == request.many
    assert [a.label for a in answers] == ["positive"] * len(request.texts)
    assert answers[0].probabilities == results[0]["probabilities"]


def test_registry_names_each_model_once_and_finds_variants():
    assert names() == [m.name for m in MODELS] and len(set(names())) == len(names())
    for m in MODELS:
        assert get(f"{m.name}_onnx") is m and m.model_config.is_file()
        assert m.example(), f"{m.name} has no EXAMPLE hook"


def test_every_binary_example_decodes_on_the_server():
    for m in MODELS:
        binary = m.samples().binary_example
        if binary is None:
            continue
        body, ctype, headers = binary()
        assert m.name != "frequency" or _server_decode(body, headers | {"Content-Type": ctype})
