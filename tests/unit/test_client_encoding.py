"""The clients' JSON encoder: orjson's speed, json.dumps's meaning for every value."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings

from clients.client import encode_json, encode_payload
from tests.support.json_values import values


def canonical(body: bytes) -> str:
    """What the server's parser reads, written one way (json.dumps writes NaN as NaN)."""
    return json.dumps(json.loads(body))


@settings(max_examples=200, deadline=None)
@given(values)
def test_encode_json_means_what_json_dumps_means(value):
    expected = json.dumps(value).encode()
    assert canonical(encode_json(value)) == canonical(expected)


def test_non_finite_numbers_keep_json_spelling():
    for value in (float("nan"), float("inf"), -float("inf")):
        payload = {"signal": [0.5, value]}
        assert encode_json(payload) == json.dumps(payload).encode()


def test_a_signal_takes_the_fast_path():
    signal = np.random.default_rng(0).standard_normal(2000).tolist()
    body, content_type = encode_payload({"signal": signal, "frequencies": [1, 3]})
    assert content_type == "application/json"
    assert b" " not in body  # orjson's compact form; json.dumps puts a space after each comma
    assert json.loads(body) == {"signal": signal, "frequencies": [1, 3]}
