"""The handlers' JSON parser (handlers.codec.parse_json) reads every body as `json.loads` does:
orjson is a faster path, never a different meaning or a different error."""

from __future__ import annotations

import json

import numpy as np
import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from handlers.codec import _may_hold_long_integer, parse_json
from handlers.errors import BadEncoding
from tests.support.json_values import values


def reference(body: bytes | str) -> str:
    """What json.loads makes of the body, written out (so 1 and 1.0, NaN and null differ)."""
    try:
        text = body if isinstance(body, str) else body.decode("utf-8")
        return json.dumps(json.loads(text))
    except (ValueError, RecursionError):
        return "BadEncoding"


def parsed(body: bytes | str) -> str:
    try:
        return json.dumps(parse_json(body))
    except BadEncoding:
        return "BadEncoding"


@settings(max_examples=200, deadline=None)
@given(values)
@example(10**400)
@example(-(10**19))
@example(18446744073709551616)
@example(float("nan"))
@example([1e308, "\ud800"])
def test_json_documents_parse_as_json_loads_parses_them(value):
    body = json.dumps(value)
    assert parsed(body.encode()) == reference(body.encode())
    assert parsed(body) == reference(body)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=40) | st.text(max_size=40).map(str.encode))
@example(b"1e400")
@example(b"\xef\xbb\xbf{}")
@example(b'"\t"')
@example(b"[1,]")
@example(b"1" * 401)
def test_any_bytes_parse_or_fail_as_json_loads(body):
    assert parsed(body) == reference(body)


@pytest.mark.parametrize("body", [b"-9999999999999999999", b"[18446744073709551616]", b"1" * 401])
def test_long_integers_stay_integers(body):
    assert parse_json(body) == json.loads(body)
    assert isinstance(parse_json(body), int | list)


def test_a_signal_of_small_floats_takes_the_fast_path():
    """Long fraction digits (0.000123...) are not integers: a real signal must not fall back to
    json (1 ms per request), as it did with a plain 19-digit search."""
    signal = (np.random.default_rng(0).standard_normal(2000) * 1e-3).tolist()
    body = orjson.dumps({"signal": signal, "frequencies": [1, 3]})
    assert b"0.000" in body
    assert not _may_hold_long_integer(body)
    assert _may_hold_long_integer(b'{"signal": [0.5, 12345678901234567890]}')
