"""The lifecycle every handler shares (handlers/base.py), driven through TorchServe's own Context:
nothing one request carries (a header, a number, an exception) decides what its batch neighbours get,
and every answer carries what TorchServe's gRPC streaming path needs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from ts.context import RequestProcessor

from handlers.base import STREAM_NEXT_HEADER
from tests.unit.test_frequency_handler import JSON, as_json, make_context, run_batch
from tests.unit.test_frequency_handler import handler as handler  # noqa: F401 - fixture
from tests.unit.test_frequency_handler import key_file as key_file  # noqa: F401 - fixture
from tests.unit.test_frequency_handler import signal as signal  # noqa: F401 - fixture


def good(signal, **headers) -> tuple[bytes, dict]:
    body, h = as_json({"signal": signal[:400].tolist(), "frequencies": [1, 7]})
    return body, h | headers


def alone(handler, request) -> tuple[int, dict]:
    [(status, body, _)] = run_batch(handler, [request])
    return status, body


@pytest.mark.parametrize(
    "mode", [{"describe": "True"}, {"explain": "True"}, {"explain": "true", "describe": "True"}]
)
def test_a_mode_header_on_request_0_does_not_switch_the_batch(handler, signal, mode):
    """TorchServe's BaseHandler.handle reads describe/explain from request 0 for the whole batch."""
    neighbour = good(signal)
    expected = alone(handler, neighbour)
    results = run_batch(handler, [good(signal, **mode), neighbour, neighbour])
    first_status, first_body, _ = results[0]
    if "explain" in mode:  # that request alone is explained; its neighbours are predicted
        assert first_status == 200 and set(first_body) >= {"attributions", "frequencies"}
    else:  # describe is not a mode here: the request is a prediction like any other
        assert (first_status, first_body) == expected
    for status, body, _ in results[1:]:
        assert (status, body) == expected


def test_an_unexpected_exception_in_one_parse_is_that_requests_500(handler, signal, monkeypatch):
    parse = handler.service.model.parse

    def fragile(request):
        if b"poison" in request.body:
            raise ZeroDivisionError("a bug nobody expected")
        return parse(request)

    monkeypatch.setattr(handler.service.model, "parse", fragile)
    neighbour = good(signal)
    expected = alone(handler, neighbour)
    poison = (b'{"poison": 1}', {"Content-Type": JSON})
    results = run_batch(handler, [poison, neighbour, neighbour])
    status, body, _ = results[0]
    assert status == 500 and body["kind"] == "internal" and body["request_id"] == "req-0"
    assert "ZeroDivisionError" not in json.dumps(body)  # the traceback is logged, not sent
    assert [(s, b) for s, b, _ in results[1:]] == [expected, expected]


def test_a_model_call_that_fails_on_one_request_fails_only_that_request(
    handler, signal, monkeypatch
):
    """The batched call raises because of one request: each is run alone, and only the culprit's
    answer is an error; the neighbours get exactly the answers they get alone."""
    inference = handler.service.model.inference

    def fails_with_7_samples(items):
        if any(getattr(r, "signal", np.zeros(1)).shape[0] == 7 for r in items):
            raise FloatingPointError("the runtime failed")
        return inference(items)

    neighbour = good(signal)
    expected = alone(handler, neighbour)
    monkeypatch.setattr(handler.service.model, "inference", fails_with_7_samples)
    culprit = as_json({"signal": [0.5] * 7})
    results = run_batch(handler, [neighbour, culprit, neighbour])
    assert results[1][0] == 500 and results[1][1]["request_id"] == "req-1"
    assert [(results[0][0], results[0][1]), (results[2][0], results[2][1])] == [expected] * 2


def test_grpc_answers_say_no_stream_follows_and_rest_answers_do_not_stream(handler, signal):
    """gRPC StreamPredictions reads ts_stream_next with no null check (a worker dies without it);
    over REST its presence alone would turn the answer into a chunked stream."""
    body, _ = good(signal)
    ctx = make_context(Path("unused"))
    grpc_row = RequestProcessor({"data": {"content-type": ""}})
    rest_row = RequestProcessor(
        {"body": {"content-type": JSON}, "content-type": JSON, "explain": "False"}
    )
    bad_grpc = RequestProcessor({"data": {"content-type": ""}})
    ctx.request_processor = [grpc_row, rest_row, bad_grpc]
    ctx.request_ids = {0: "a", 1: "b", 2: "c"}
    out = handler.handle([{"data": body}, {"body": json.loads(body)}, {"data": b"{"}], ctx)
    assert len(out) == 3
    assert ctx.get_response_headers(0)[STREAM_NEXT_HEADER] == "false"
    assert ctx.get_response_headers(2)[STREAM_NEXT_HEADER] == "false"  # refused ones too
    assert STREAM_NEXT_HEADER not in ctx.get_response_headers(1)


@pytest.mark.parametrize(
    "sample_rate",
    [10**400, -(10**400), "1" + "0" * 900_000, "1e999", 1e308, "١٠٠٠", [1000], {"hz": 1000}],
    ids=[
        "401-digits",
        "negative-401",
        "900k-digit-string",
        "1e999",
        "1e308",
        "arabic",
        "list",
        "object",
    ],
)
def test_out_of_range_numbers_are_a_bounded_400_beside_answered_neighbours(
    handler, signal, sample_rate
):
    neighbour = good(signal)
    expected = alone(handler, neighbour)
    attacker = as_json({"signal": [0.5] * 64, "sample_rate": sample_rate})
    results = run_batch(handler, [attacker, neighbour])
    status, body, _ = results[0]
    assert status == 400 and body["kind"] == "bad_field"
    assert len(json.dumps(body)) < 600  # nothing the client sent is echoed whole
    assert (results[1][0], results[1][1]) == expected


def test_frequency_batches_have_a_work_budget(handler, signal):
    """Like sentiment's tokens: requests past samples x frequencies are refused fast with
    Retry-After, in arrival order; the first request of a batch always runs."""
    budget = handler.settings.max_batch_samples
    big = as_json({"signal": np.resize(signal, handler.settings.max_samples).tolist()})
    per_request = handler.settings.max_samples * len(handler.settings.frequencies)
    fits = budget // per_request
    results = run_batch(handler, [big] * (fits + 2))
    assert [s for s, _, _ in results] == [200] * max(fits, 1) + [503] * (fits + 2 - max(fits, 1))
    _, body, headers = results[-1]
    assert body["kind"] == "overloaded" and headers["Retry-After"] == "1"
